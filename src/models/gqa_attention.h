#pragma once
// Grouped-query attention with an F16 KV cache, the mixer of qwen3moe's layers, of
// qwen35moe's full-attention layers and of laguna's full and sliding-window layers:
//   q = wq h, k = wk h, v = wv h        (kSigmoidInQuery: wq yields query and gate per
//                                        head, interleaved: rows [2hD, 2hD+D) query, then gate)
//   q, k = rms_norm per head (if the layer has q/k norms), then rope on their first
//          rope.n_dims dimensions (NEOX pairs; partial rotary when n_dims < head_dim)
//   o = causal softmax(q k^T / sqrt(D)) v, query head h reading KV head h / (n_head / n_head_kv);
//       with a window W, a query at position p sees positions p-W+1..p only
//   kSigmoidInQuery: o *= sigmoid(gate)
//   kSoftplus:       o *= softplus(wg h), per head (wg has n_head rows) or per element
//   out = wo o
// The block owns the KV cache of every attention layer it serves (one slot per layer)
// and its scratch. A full layer's cache has a row per position; a windowed layer's is a
// ring of W + max_tokens - 1 + kRollbackRows rows, whatever the context.
#include <cstdint>

#include "core/matrix.h"
#include "core/quantized_input.h"
#include "core/rope.h"
#include "models/activations.h"
#include "models/hparams.h"
#include "models/state_allocator.h"
#include "models/weight_binder.h"

namespace epq::models {

struct GqaShape {
  enum class Gate { kNone, kSigmoidInQuery, kSoftplus };
  int n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  float rms_eps = 1e-6f;
  Gate gate = Gate::kNone;
  int window = 0;  // sliding window in positions, 0 for full attention
  RopeParams rope; // rope.n_dims <= head_dim
  int64_t q_dim() const { return int64_t{n_head} * head_dim; }
  int64_t kv_dim() const { return int64_t{n_head_kv} * head_dim; }
  // Bytes of K and V per token and layer in the cache.
  uint64_t kv_bytes_per_token() const { return 2 * static_cast<uint64_t>(kv_dim()) * sizeof(uint16_t); }
  // Cache rows per layer: n_ctx, or for a window the ring that batches of max_tokens need
  // plus kRollbackRows, the positions a sequence can be rolled back and keep its cache.
  int64_t cache_rows(int n_ctx, int max_tokens) const;
  static constexpr int kRollbackRows = 256;
};

struct GqaWeights {
  Matrix wq, wk, wv, wo;
  const float* q_norm = nullptr;  // [head_dim] each, or null
  const float* k_norm = nullptr;
  Matrix gate;                    // kSoftplus: attn_gate, [n_embd, n_head] or [n_embd, q_dim]
};

// The shape "<arch>.attention.*" gives a layer of n_head query heads: head_count_kv (n_head
// if absent), key_length = value_length (n_embd / n_head if absent); no gate, no window,
// no rope (the caller's). Shapes the kernels cannot run are refused with one line.
GqaShape gqa_shape(const HparamReader& r, int n_embd, int n_head, float rms_eps);

// Binds blk.<layer>.attn_{q,k,v,output}, attn_{q,k}_norm (required when qk_norm) and,
// for kSoftplus, attn_gate (n_head or n_head x head_dim wide).
GqaWeights bind_gqa(const WeightBinder& w, int layer, const GqaShape& shape, bool qk_norm);

class GqaAttention {
 public:
  // Cache for n_layers layers of n_ctx positions; batches of up to max_tokens tokens.
  GqaAttention(StateAllocator& alloc, const GqaShape& shape, int n_layers, int n_ctx, int max_tokens, int n_threads);

  // Rope tables for the batch's positions (once per forward pass).
  void prepare(const Activations& act, int64_t n_tokens);
  // act.out = attention over act.input for cache slot `slot`; positions pos0.. enter the cache.
  void forward(ThreadPool& pool, const GqaWeights& w, int slot, Activations& act, int64_t n_tokens, int32_t pos0);
  // The oldest position a sequence now at `position` can be rolled back to: older
  // positions' windows have left the ring (0 for full attention).
  int32_t oldest_rollback(int32_t position) const;

 private:
  void apply_gate(ThreadPool& pool, const GqaWeights& w, int64_t n_tokens);

  GqaShape s_;
  int64_t rows_;              // cache rows per slot; position p is row p % rows_
  Buffer k_cache_, v_cache_;  // [slot][kv head][row][head_dim] F16
  Buffer q_, k_, v_, attn_;   // [T][q_dim], [T][kv_dim] x2, [T][q_dim]
  Buffer query_gate_, gate_;  // gated: wq's [T][2 q_dim] output (kSigmoidInQuery), and the gates [T][q_dim]
  Buffer scores_;             // attention scores scratch, per thread
  QuantizedInput attn_input_; // attn, quantized for wo
  RopeTable rope_;
};

}  // namespace epq::models
