#pragma once
// The FFN half of a layer, as the MoE architectures build it:
//   leading dense layers (l < n_dense):  out = dense_ffn(h)
//   the others:  out = routed_moe(h) + shared_expert(h)  (when there is one; its output
//                scaled by sigmoid(g . h) when gated)
// h is the block input (act.input); out goes to act.out.
#include <cstdint>
#include <vector>

#include "models/activations.h"
#include "models/expert_layout.h"
#include "models/expert_source.h"
#include "models/model.h"
#include "models/routed_moe.h"
#include "models/swiglu_ffn.h"

namespace epq::models {

struct FeedForwardShape {
  MoeShape moe;
  int n_dense = 0;              // leading dense layers
  std::vector<int> n_ff_dense;  // their feed-forward lengths, one per dense layer
  int n_ff_shared = 0;          // 0: no shared expert
  bool shared_gated = false;    // the shared expert has ffn_gate_inp_shexp
  bool selection_bias = false;  // the router reads exp_probs_b where a layer has it
};

struct FeedForwardWeights {
  FfnWeights dense;   // dense layers
  MoeWeights moe;     // the others
  FfnWeights shared;
};

FeedForwardWeights bind_feed_forward(const WeightBinder& w, int layer, const FeedForwardShape& shape);

class FeedForward {
 public:
  FeedForward(StateAllocator& alloc, const FeedForwardShape& shape, int max_tokens);
  // act.out = layer's FFN of act.input; routed experts come from `experts`.
  void forward(ThreadPool& pool, const FeedForwardWeights& w, int layer, const ExpertLayout& layout, ExpertSource& experts,
               Activations& act, int64_t n_tokens, ForwardTiming* timing);

 private:
  FeedForwardShape s_;
  SwigluFfn dense_;
  RoutedMoe moe_;
  SwigluFfn shared_;
};

}  // namespace epq::models
