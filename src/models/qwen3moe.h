#pragma once
// Qwen3-MoE (general.architecture "qwen3moe"), the graph of Qwen3-30B-A3B and
// Qwen3-235B-A22B, as llama.cpp builds it:
//   x = embed(tokens)
//   per layer:  h = rmsnorm(x) -> q, k, v;  per-head rmsnorm of q and k;  NEOX rope
//               x += wo * attention(q, k, v)          (causal, grouped-query, 1/sqrt(d))
//               h = rmsnorm(x);  p = softmax(router * h);  top-k of p, renormalized
//               x += sum over the k experts, in top-k order, of p_e * down_e(silu(gate_e h) * up_e h)
//   logits = output * rmsnorm(x)              (output = token_embd when output.weight is absent)
#include <memory>

#include "core/rope.h"
#include "models/model.h"

namespace epq::models {

struct Qwen3MoeHparams {
  int n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ctx_train = 0;
  float rms_eps = 1e-6f;
  RopeParams rope;
};

Qwen3MoeHparams read_qwen3moe_hparams(const gguf::File& file, const ModelOptions& options);
ModelInfo qwen3moe_info(const gguf::File& file, const ModelOptions& options);
uint64_t qwen3moe_state_bytes(const gguf::File& file, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads);
std::unique_ptr<Model> load_qwen3moe(const gguf::File& file, const ResidentWeights& weights, const ModelOptions& options);

}  // namespace epq::models
