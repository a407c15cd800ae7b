#pragma once
// Grouped-query attention with an F16 KV cache, the mixer of qwen3moe's layers and of
// qwen35moe's full-attention layers:
//   q = wq h, k = wk h, v = wv h        (gated: wq yields query and gate per head,
//                                        interleaved: rows [2hD, 2hD+D) query, then gate)
//   q, k = rms_norm per head (if the layer has q/k norms), then rope on their first
//          rope.n_dims dimensions (NEOX pairs; partial rotary when n_dims < head_dim)
//   o = causal softmax(q k^T / sqrt(D)) v, query head h reading KV head h / (n_head / n_head_kv)
//   gated: o *= sigmoid(gate)
//   out = wo o
// The block owns the KV cache of every attention layer it serves (one slot per layer)
// and its scratch.
#include <cstdint>

#include "core/matrix.h"
#include "core/quantized_input.h"
#include "core/rope.h"
#include "models/activations.h"
#include "models/state_allocator.h"
#include "models/weight_binder.h"

namespace epq::models {

struct GqaShape {
  int n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  float rms_eps = 1e-6f;
  bool gated = false;  // wq also yields a sigmoid output gate per head
  RopeParams rope;     // rope.n_dims <= head_dim
  int64_t q_dim() const { return int64_t{n_head} * head_dim; }
  int64_t kv_dim() const { return int64_t{n_head_kv} * head_dim; }
  // Bytes of K and V per token and layer in the cache.
  uint64_t kv_bytes_per_token() const { return 2 * static_cast<uint64_t>(kv_dim()) * sizeof(uint16_t); }
};

struct GqaWeights {
  Matrix wq, wk, wv, wo;
  const float* q_norm = nullptr;  // [head_dim] each, or null
  const float* k_norm = nullptr;
};

// Binds blk.<layer>.attn_{q,k,v,output} and attn_{q,k}_norm (required when qk_norm).
GqaWeights bind_gqa(const WeightBinder& w, int layer, const GqaShape& shape, bool qk_norm);

class GqaAttention {
 public:
  // Cache for n_layers layers of n_ctx positions; batches of up to max_tokens tokens.
  GqaAttention(StateAllocator& alloc, const GqaShape& shape, int n_layers, int n_ctx, int max_tokens, int n_threads);

  // Rope tables for the batch's positions (once per forward pass).
  void prepare(const Activations& act, int64_t n_tokens);
  // act.out = attention over act.input for cache slot `slot`; positions pos0.. enter the cache.
  void forward(ThreadPool& pool, const GqaWeights& w, int slot, Activations& act, int64_t n_tokens, int32_t pos0);

 private:
  GqaShape s_;
  int n_ctx_;
  Buffer k_cache_, v_cache_;  // [slot][position][kv_dim] F16
  Buffer q_, k_, v_, attn_;   // [T][q_dim], [T][kv_dim] x2, [T][q_dim]
  Buffer query_gate_, gate_;  // gated only: wq's [T][2 q_dim] output, and the gates [T][q_dim]
  Buffer scores_;             // attention scores scratch, per thread
  QuantizedInput attn_input_; // attn, quantized for wo
  RopeTable rope_;
};

}  // namespace epq::models
