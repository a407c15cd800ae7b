#include "models/gqa_attention.h"

#include <algorithm>
#include <cmath>

#include "core/attention.h"
#include "core/matmul.h"
#include "core/ops.h"
#include "quant/float_bits.h"
#include "util/error.h"

namespace epq::models {

int64_t GqaShape::cache_rows(int n_ctx, int max_tokens) const {
  // A batch writes max_tokens rows before its first query reads the window - 1 before it;
  // kRollbackRows more let a conversation roll back that far and keep its cache.
  return window > 0 ? std::min<int64_t>(n_ctx, int64_t{window} + max_tokens - 1 + kRollbackRows) : n_ctx;
}

GqaShape gqa_shape(const HparamReader& r, int n_embd, int n_head, float rms_eps) {
  const std::string& path = r.file().path();
  GqaShape a;
  a.n_embd = n_embd;
  a.n_head = n_head;
  a.n_head_kv = r.count_or("attention.head_count_kv", n_head);
  a.head_dim = r.count_or("attention.key_length", n_embd / n_head);
  a.rms_eps = rms_eps;
  const int value_length = r.count_or("attention.value_length", a.head_dim);
  if (value_length != a.head_dim) fail("{}: key_length {} != value_length {} is not supported", path, a.head_dim, value_length);
  if (a.n_head % a.n_head_kv != 0) fail("{}: {} heads are not a multiple of {} KV heads", path, a.n_head, a.n_head_kv);
  if (a.head_dim % 8 != 0) fail("{}: head dimension {} is not a multiple of 8", path, a.head_dim);
  return a;
}

GqaWeights bind_gqa(const WeightBinder& w, int layer, const GqaShape& s, bool qk_norm) {
  using Gate = GqaShape::Gate;
  GqaWeights g;
  g.wq = w.matrix(layer_tensor(layer, "attn_q"), s.n_embd, s.q_dim() * (s.gate == Gate::kSigmoidInQuery ? 2 : 1));
  g.wk = w.matrix(layer_tensor(layer, "attn_k"), s.n_embd, s.kv_dim());
  g.wv = w.matrix(layer_tensor(layer, "attn_v"), s.n_embd, s.kv_dim());
  g.wo = w.matrix(layer_tensor(layer, "attn_output"), s.q_dim(), s.n_embd);
  if (qk_norm) {
    g.q_norm = w.vector(layer_tensor(layer, "attn_q_norm"), s.head_dim);
    g.k_norm = w.vector(layer_tensor(layer, "attn_k_norm"), s.head_dim);
  }
  if (s.gate == Gate::kSoftplus) {
    const std::string name = layer_tensor(layer, "attn_gate");
    const gguf::TensorInfo* t = w.file().find_tensor(name);
    const int64_t width = t && t->dims.size() == 2 ? t->dims[1] : 0;
    if (width != s.n_head && width != s.q_dim()) {
      fail("{}: {} must have {} (per head) or {} (per element) rows", w.file().path(), name, s.n_head, s.q_dim());
    }
    g.gate = w.matrix(name, s.n_embd, width);
  }
  return g;
}

GqaAttention::GqaAttention(StateAllocator& alloc, const GqaShape& shape, int n_layers, int n_ctx, int max_tokens, int n_threads)
    : s_(shape), rows_(shape.cache_rows(n_ctx, max_tokens)), rope_(shape.rope) {
  const size_t f = sizeof(float), T = static_cast<size_t>(max_tokens);
  const size_t cache = static_cast<size_t>(n_layers) * static_cast<size_t>(rows_) * static_cast<size_t>(s_.kv_dim()) * sizeof(uint16_t);
  k_cache_ = alloc.take(cache);
  v_cache_ = alloc.take(cache);
  q_ = alloc.take(T * static_cast<size_t>(s_.q_dim()) * f);
  if (s_.gate == GqaShape::Gate::kSigmoidInQuery) query_gate_ = alloc.take(2 * T * static_cast<size_t>(s_.q_dim()) * f);
  if (s_.gate != GqaShape::Gate::kNone) gate_ = alloc.take(T * static_cast<size_t>(s_.q_dim()) * f);
  attn_ = alloc.take(T * static_cast<size_t>(s_.q_dim()) * f);
  k_ = alloc.take(T * static_cast<size_t>(s_.kv_dim()) * f);
  v_ = alloc.take(T * static_cast<size_t>(s_.kv_dim()) * f);
  const AttentionShape a{s_.n_head, s_.n_head_kv, s_.head_dim, 0, s_.window};
  scores_ = alloc.take(attention_scratch_floats(a, rows_, n_threads) * f);
  attn_input_ = alloc.input(max_tokens, s_.q_dim());
}

int32_t GqaAttention::oldest_rollback(int32_t position) const {
  if (s_.window == 0) return 0;
  // Rows hold positions position - rows_ .. position - 1; continuing at n reads n - W + 1 on.
  return static_cast<int32_t>(std::max<int64_t>(0, position - rows_ + s_.window - 1));
}

void GqaAttention::prepare(const Activations& act, int64_t n_tokens) { rope_.compute(act.positions.data(), n_tokens); }

void GqaAttention::forward(ThreadPool& pool, const GqaWeights& w, int slot, Activations& act, int64_t T, int32_t pos0) {
  using Gate = GqaShape::Gate;
  const int64_t D = s_.head_dim, Q = s_.q_dim(), KV = s_.kv_dim();
  const bool query_gate = s_.gate == Gate::kSigmoidInQuery;
  float* q = q_.as<float>();
  MatmulJob jobs[4] = {matmul_job(w.wq, act.input, query_gate ? query_gate_.as<float>() : q, static_cast<size_t>(query_gate ? 2 * Q : Q)),
                       matmul_job(w.wk, act.input, k_.as<float>(), static_cast<size_t>(KV)),
                       matmul_job(w.wv, act.input, v_.as<float>(), static_cast<size_t>(KV))};
  size_t n_jobs = 3;
  if (s_.gate == Gate::kSoftplus) jobs[n_jobs++] = matmul_job(w.gate, act.input, gate_.as<float>(), static_cast<size_t>(w.gate.rows));
  run_shared_matmuls(pool, std::span(jobs, n_jobs));

  // kSigmoidInQuery: query head h is at [2hD, 2hD + D) of its token's row, its gate right
  // after. Then per-head norms and rope, and K and V enter the cache as F16.
  const size_t layer_offset = static_cast<size_t>(slot) * static_cast<size_t>(rows_) * static_cast<size_t>(KV);
  uint16_t* k_cache = k_cache_.as<uint16_t>() + layer_offset;
  uint16_t* v_cache = v_cache_.as<uint16_t>() + layer_offset;
  const AttentionShape shape{s_.n_head, s_.n_head_kv, s_.head_dim, 1.0f / std::sqrt(static_cast<float>(D)), s_.window};
  // One task per head of each token (the query heads, then the KV heads), so that even one
  // token's heads are shared among the threads.
  const int heads = s_.n_head + s_.n_head_kv;
  pool.run(T * heads, [&](int64_t task, int) {
    const int64_t t = task / heads;
    const int hd = static_cast<int>(task % heads);
    if (hd < s_.n_head) {
      float* head = q + t * Q + hd * D;
      if (query_gate) {
        const float* both = query_gate_.as<float>() + t * 2 * Q + hd * 2 * D;
        std::copy_n(both, D, head);
        std::copy_n(both + D, D, gate_.as<float>() + t * Q + hd * D);
      }
      if (w.q_norm) ops::rms_norm(head, w.q_norm, s_.rms_eps, D, head);
      rope_.apply(head, t);
      return;
    }
    const int kv = hd - s_.n_head;
    float* head = k_.as<float>() + t * KV + kv * D;
    if (w.k_norm) ops::rms_norm(head, w.k_norm, s_.rms_eps, D, head);
    rope_.apply(head, t);
    uint16_t* k_row = k_cache + shape.k_at(kv, (pos0 + t) % rows_, rows_);
    uint16_t* v_row = v_cache + shape.v_at(kv, (pos0 + t) % rows_, rows_);
    for (int64_t i = 0; i < D; ++i) {
      k_row[i] = quant::f32_to_f16(head[i]);
      v_row[i] = quant::f32_to_f16(v_.as<float>()[t * KV + kv * D + i]);
    }
  });
  attention(pool, shape, q, k_cache, v_cache, rows_, act.positions.data(), T, attn_.as<float>(), scores_.as<float>());
  if (s_.gate != Gate::kNone) apply_gate(pool, w, T);

  attn_input_.set(pool, attn_.as<float>(), T, Q, static_cast<size_t>(Q));
  const MatmulJob out[] = {matmul_job(w.wo, attn_input_, act.out.as<float>(), static_cast<size_t>(s_.n_embd))};
  run_shared_matmuls(pool, out);
}

void GqaAttention::apply_gate(ThreadPool& pool, const GqaWeights& w, int64_t T) {
  const int64_t Q = s_.q_dim();
  float* o = attn_.as<float>();
  const float* gate = gate_.as<float>();
  if (s_.gate == GqaShape::Gate::kSigmoidInQuery) return ops::mul_sigmoid(o, gate, T * Q);
  // kSoftplus: gate_ rows are w.gate.rows wide, one value per head or per element.
  const int64_t G = w.gate.rows, per = Q / G;
  pool.run(T, [&](int64_t t, int) {
    for (int64_t i = 0; i < Q; ++i) o[t * Q + i] *= ops::softplus(gate[t * G + i / per]);
  });
}

}  // namespace epq::models
