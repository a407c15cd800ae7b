#include "models/gqa_attention.h"

#include <algorithm>
#include <cmath>

#include "core/attention.h"
#include "core/matmul.h"
#include "core/ops.h"
#include "quant/float_bits.h"

namespace epq::models {

GqaWeights bind_gqa(const WeightBinder& w, int layer, const GqaShape& s, bool qk_norm) {
  GqaWeights g;
  g.wq = w.matrix(layer_tensor(layer, "attn_q"), s.n_embd, s.q_dim() * (s.gated ? 2 : 1));
  g.wk = w.matrix(layer_tensor(layer, "attn_k"), s.n_embd, s.kv_dim());
  g.wv = w.matrix(layer_tensor(layer, "attn_v"), s.n_embd, s.kv_dim());
  g.wo = w.matrix(layer_tensor(layer, "attn_output"), s.q_dim(), s.n_embd);
  if (qk_norm) {
    g.q_norm = w.vector(layer_tensor(layer, "attn_q_norm"), s.head_dim);
    g.k_norm = w.vector(layer_tensor(layer, "attn_k_norm"), s.head_dim);
  }
  return g;
}

GqaAttention::GqaAttention(StateAllocator& alloc, const GqaShape& shape, int n_layers, int n_ctx, int max_tokens, int n_threads)
    : s_(shape), n_ctx_(n_ctx), rope_(shape.rope) {
  const size_t f = sizeof(float), T = static_cast<size_t>(max_tokens);
  const size_t cache = static_cast<size_t>(n_layers) * static_cast<size_t>(n_ctx) * static_cast<size_t>(s_.kv_dim()) * sizeof(uint16_t);
  k_cache_ = alloc.take(cache);
  v_cache_ = alloc.take(cache);
  q_ = alloc.take(T * static_cast<size_t>(s_.q_dim()) * f);
  if (s_.gated) {
    query_gate_ = alloc.take(2 * T * static_cast<size_t>(s_.q_dim()) * f);
    gate_ = alloc.take(T * static_cast<size_t>(s_.q_dim()) * f);
  }
  attn_ = alloc.take(T * static_cast<size_t>(s_.q_dim()) * f);
  k_ = alloc.take(T * static_cast<size_t>(s_.kv_dim()) * f);
  v_ = alloc.take(T * static_cast<size_t>(s_.kv_dim()) * f);
  scores_ = alloc.take(static_cast<size_t>(n_threads) * static_cast<size_t>(n_ctx) * kAttentionScoresPerPosition * f);
  attn_input_ = alloc.input(max_tokens, s_.q_dim());
}

void GqaAttention::prepare(const Activations& act, int64_t n_tokens) { rope_.compute(act.positions.data(), n_tokens); }

void GqaAttention::forward(ThreadPool& pool, const GqaWeights& w, int slot, Activations& act, int64_t T, int32_t pos0) {
  const int64_t D = s_.head_dim, Q = s_.q_dim(), KV = s_.kv_dim();
  float* q = q_.as<float>();
  const MatmulJob qkv[] = {matmul_job(w.wq, act.input, s_.gated ? query_gate_.as<float>() : q, static_cast<size_t>(s_.gated ? 2 * Q : Q)),
                           matmul_job(w.wk, act.input, k_.as<float>(), static_cast<size_t>(KV)),
                           matmul_job(w.wv, act.input, v_.as<float>(), static_cast<size_t>(KV))};
  run_matmuls(pool, qkv);

  // Gated: query head h is at [2hD, 2hD + D) of its token's row, its gate right after.
  // Then per-head norms and rope, and K and V enter the cache as F16.
  const size_t layer_offset = static_cast<size_t>(slot) * static_cast<size_t>(n_ctx_) * static_cast<size_t>(KV);
  uint16_t* k_cache = k_cache_.as<uint16_t>() + layer_offset;
  uint16_t* v_cache = v_cache_.as<uint16_t>() + layer_offset;
  pool.run(T, [&](int64_t t, int) {
    for (int hd = 0; hd < s_.n_head; ++hd) {
      float* head = q + t * Q + hd * D;
      if (s_.gated) {
        const float* both = query_gate_.as<float>() + t * 2 * Q + hd * 2 * D;
        std::copy_n(both, D, head);
        std::copy_n(both + D, D, gate_.as<float>() + t * Q + hd * D);
      }
      if (w.q_norm) ops::rms_norm(head, w.q_norm, s_.rms_eps, D, head);
      rope_.apply(head, t);
    }
    for (int hd = 0; hd < s_.n_head_kv; ++hd) {
      float* head = k_.as<float>() + t * KV + hd * D;
      if (w.k_norm) ops::rms_norm(head, w.k_norm, s_.rms_eps, D, head);
      rope_.apply(head, t);
    }
    const size_t row = static_cast<size_t>(pos0 + t) * static_cast<size_t>(KV);
    for (int64_t i = 0; i < KV; ++i) {
      k_cache[row + static_cast<size_t>(i)] = quant::f32_to_f16(k_.as<float>()[t * KV + i]);
      v_cache[row + static_cast<size_t>(i)] = quant::f32_to_f16(v_.as<float>()[t * KV + i]);
    }
  });
  const AttentionShape shape{s_.n_head, s_.n_head_kv, s_.head_dim, 1.0f / std::sqrt(static_cast<float>(D))};
  attention(pool, shape, q, k_cache, v_cache, act.positions.data(), T, attn_.as<float>(), scores_.as<float>(), n_ctx_);
  if (s_.gated) ops::mul_sigmoid(attn_.as<float>(), gate_.as<float>(), T * Q);

  attn_input_.set(attn_.as<float>(), T, Q, static_cast<size_t>(Q));
  const MatmulJob out[] = {matmul_job(w.wo, attn_input_, act.out.as<float>(), static_cast<size_t>(s_.n_embd))};
  run_matmuls(pool, out);
}

}  // namespace epq::models
