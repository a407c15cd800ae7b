#pragma once
// The routed-expert FFN: a router picks k experts per token, and the output is
//   out = sum over the token's experts, in top-k order, of w_j * down_e(silu(gate_e h) * up_e h)
// with h the block input (act.input). Experts come from an ExpertSource (all in RAM or
// paged): the block asks for the distinct experts of the batch and computes each one, on
// the tokens that chose it, as soon as it is in memory. The sum never depends on arrival
// order, so paged and resident runs give the same bits.
#include <cstdint>

#include "core/matrix.h"
#include "models/activations.h"
#include "models/expert_layout.h"
#include "models/expert_source.h"
#include "models/hparams.h"
#include "models/model.h"
#include "models/router.h"
#include "models/weight_binder.h"

namespace epq::models {

struct MoeShape {
  int n_embd = 0, n_expert = 0, n_expert_used = 0, n_ff = 0;
  RouterConfig router;
};

struct MoeWeights {
  Matrix router;                    // ffn_gate_inp [n_embd, n_expert]
  const float* bias = nullptr;      // exp_probs_b [n_expert], the selection bias, or null
  // The next layer's router and bias when it is a routed layer too (data null otherwise),
  // for the stale-gate prediction of its experts (ExpertSource::predicted).
  Matrix next_router;
  const float* next_bias = nullptr;
};

// The router variant "<arch>.expert_*" names: expert_gating_func (1 softmax, 2 sigmoid),
// expert_weights_norm, expert_weights_scale (0 or absent: 1), expert_group_count and
// expert_group_used_count; absent keys keep the architecture's defaults.
RouterConfig read_router_config(const HparamReader& r, RouterConfig defaults);

// Binds blk.<layer>.ffn_gate_inp (and exp_probs_b.bias when has_bias), and the same of
// layer + 1 if they are loaded.
MoeWeights bind_moe(const WeightBinder& w, int layer, const MoeShape& shape, bool has_bias);

class RoutedMoe {
 public:
  RoutedMoe(StateAllocator& alloc, const MoeShape& shape, int max_tokens);
  // act.out = the routed experts' weighted sum for act.input. When `experts` wants
  // predictions and the next layer is routed, it first hears which experts the next
  // layer's router picks for this act.input (the stale gate): the union over tokens, each
  // token's in top-k order.
  void forward(ThreadPool& pool, const MoeWeights& w, const ExpertLayout& layout, int layer, ExpertSource& experts,
               Activations& act, int64_t n_tokens, ForwardTiming* timing);

 private:
  MoeShape s_;
  std::vector<Router> routers_;  // one per thread of the pool (grown on first use): their scratch is their own
  Buffer logits_;                                  // [T][n_expert]
  Buffer next_logits_;                             // [T][n_expert]: the stale gate's
  Buffer gate_out_, up_out_;                       // [T * k][n_ff]: one row per (token, expert) assignment
  Buffer down_out_;                                // [T * k][n_embd]
  Buffer gathered_gate_, gathered_up_, hidden_act_;  // quantized inputs of the expert matrices
};

}  // namespace epq::models
