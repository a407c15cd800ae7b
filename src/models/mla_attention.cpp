#include "models/mla_attention.h"

#include <algorithm>
#include <cmath>

#include "core/attention.h"
#include "core/matmul.h"
#include "core/ops.h"
#include "quant/float_bits.h"
#include "util/error.h"

namespace epq::models {

MlaShape read_mla_shape(const HparamReader& r, int n_embd, int n_ctx_train, float rms_eps) {
  const std::string& path = r.file().path();
  if (!r.has("attention.key_length_mla")) {
    fail("{}: this is a deepseek2 file of the older layout (attn_kv_b, no attention.key_length_mla), which EPQ does not "
         "run; convert the model again with a current llama.cpp",
         path);
  }
  MlaShape s;
  s.n_embd = n_embd;
  s.n_head = r.count("attention.head_count");
  s.rms_eps = rms_eps;
  s.rope_dims = r.count("rope.dimension_count");
  const int key = r.count("attention.key_length_mla");
  s.nope = key - s.rope_dims;
  s.v_dim = r.count("attention.value_length_mla");
  s.kv_lora = r.count("attention.kv_lora_rank");
  s.q_lora = r.count_or_zero("attention.q_lora_rank");
  if (s.nope < 1 || s.rope_dims % 2 != 0) fail("{}: key_length_mla {} must exceed the even rope.dimension_count {}", path, key, s.rope_dims);
  if (r.count_or("attention.head_count_kv", 1) != 1) fail("{}: MLA files have one KV head (attention.head_count_kv 1)", path);
  if (r.count_or("attention.key_length", s.cache_row()) != s.cache_row() || r.count_or("attention.value_length", s.kv_lora) != s.kv_lora) {
    fail("{}: attention.key_length/value_length must be kv_lora_rank + rope dims ({}) and kv_lora_rank ({})", path, s.cache_row(), s.kv_lora);
  }
  if (s.kv_lora % 8 != 0 || s.rope_dims % 8 != 0) fail("{}: kv_lora_rank {} and rope dims {} must be multiples of 8", path, s.kv_lora, s.rope_dims);
  s.rope = r.rope(s.rope_dims, n_ctx_train);
  s.rope.neox = false;
  float mscale = 1;
  if (s.rope.ext_factor != 0 && r.has("rope.scaling.yarn_log_multiplier")) {
    // YaRN as llama.cpp runs deepseek2: rotated vectors keep magnitude 1, and the scores
    // take mscale^2 with mscale = 1 + 0.1 m ln(factor), m = yarn_log_multiplier / 0.1.
    const float log_factor = std::log(1.0f / s.rope.freq_scale);
    s.rope.attn_factor = 1.0f / (1.0f + 0.1f * log_factor);
    mscale = 1.0f + r.real("rope.scaling.yarn_log_multiplier", 0, 100) * log_factor;
  }
  s.kq_scale = mscale * mscale / std::sqrt(static_cast<float>(key));
  return s;
}

MlaWeights bind_mla(const WeightBinder& w, int layer, const MlaShape& s) {
  MlaWeights m;
  const int64_t E = s.n_embd, H = s.n_head, QH = s.q_head();
  if (s.q_lora > 0) {
    m.q_a = w.matrix(layer_tensor(layer, "attn_q_a"), E, s.q_lora);
    m.q_a_norm = w.vector(layer_tensor(layer, "attn_q_a_norm"), s.q_lora);
    m.q_b = w.matrix(layer_tensor(layer, "attn_q_b"), s.q_lora, H * QH);
  } else {
    m.q = w.matrix(layer_tensor(layer, "attn_q"), E, H * QH);
  }
  m.kv_a = w.matrix(layer_tensor(layer, "attn_kv_a_mqa"), E, s.cache_row());
  m.kv_a_norm = w.vector(layer_tensor(layer, "attn_kv_a_norm"), s.kv_lora);
  m.k_b = w.stacked(layer_tensor(layer, "attn_k_b"), s.nope, s.kv_lora, H);
  m.v_b = w.stacked(layer_tensor(layer, "attn_v_b"), s.kv_lora, s.v_dim, H);
  m.wo = w.matrix(layer_tensor(layer, "attn_output"), H * s.v_dim, E);
  return m;
}

MlaAttention::MlaAttention(StateAllocator& alloc, const MlaShape& shape, int n_layers, int n_ctx, int max_tokens, int n_threads)
    : s_(shape), n_ctx_(n_ctx), rope_(shape.rope) {
  const size_t f = sizeof(float), T = static_cast<size_t>(max_tokens), H = static_cast<size_t>(s_.n_head);
  const size_t row = static_cast<size_t>(s_.cache_row());
  cache_ = alloc.take(static_cast<size_t>(n_layers) * static_cast<size_t>(n_ctx) * row * sizeof(uint16_t));
  if (s_.q_lora > 0) q_a_ = alloc.take(T * static_cast<size_t>(s_.q_lora) * f);
  q_ = alloc.take(T * H * static_cast<size_t>(s_.q_head()) * f);
  kv_ = alloc.take(T * row * f);
  query_ = alloc.take(T * H * row * f);
  o_ = alloc.take(T * H * static_cast<size_t>(s_.kv_lora) * f);
  u_ = alloc.take(T * H * static_cast<size_t>(s_.v_dim) * f);
  const AttentionShape a{s_.n_head, 1, s_.cache_row(), 0, 0, s_.kv_lora, s_.cache_row()};
  scores_ = alloc.take(attention_scratch_floats(a, n_ctx, n_threads) * f);
  if (s_.q_lora > 0) q_a_input_ = alloc.input(max_tokens, s_.q_lora);
  nope_input_ = alloc.input(max_tokens * s_.n_head, s_.nope);
  o_input_ = alloc.input(max_tokens * s_.n_head, s_.kv_lora);
  u_input_ = alloc.input(max_tokens, int64_t{s_.n_head} * s_.v_dim);
}

void MlaAttention::prepare(const Activations& act, int64_t n_tokens) { rope_.compute(act.positions.data(), n_tokens); }

namespace {

// Jobs multiplying head h's matrix with head h's rows of input, where input holds T x H
// rows (token-major): out[t * out_stride + h * out_head + r].
const std::vector<MatmulJob>& per_head_jobs(std::vector<MatmulJob>& jobs, const std::vector<Matrix>& w, QuantizedInput& input,
                                            int64_t T, float* out, size_t out_head, size_t out_stride) {
  jobs.clear();
  const size_t H = w.size();
  for (size_t h = 0; h < H; ++h) {
    const quant::ActFormat f = quant::activation_format(w[h].type);
    jobs.push_back({&w[h], input.data(f) + h * input.stride(f), H * input.stride(f), T, out + h * out_head, out_stride});
  }
  return jobs;
}

}  // namespace

void MlaAttention::forward(ThreadPool& pool, const MlaWeights& w, int slot, Activations& act, int64_t T, int32_t pos0) {
  const int64_t H = s_.n_head, QH = s_.q_head(), L = s_.kv_lora, R = s_.rope_dims, CR = s_.cache_row();
  float* q = q_.as<float>();
  float* kv = kv_.as<float>();
  float* query = query_.as<float>();
  if (s_.q_lora > 0) {
    const MatmulJob a[] = {matmul_job(w.q_a, act.input, q_a_.as<float>(), static_cast<size_t>(s_.q_lora)),
                           matmul_job(w.kv_a, act.input, kv, static_cast<size_t>(CR))};
    run_shared_matmuls(pool, a);
    pool.run(T, [&](int64_t t, int) {
      float* x = q_a_.as<float>() + t * s_.q_lora;
      ops::rms_norm(x, w.q_a_norm, s_.rms_eps, s_.q_lora, x);
    });
    q_a_input_.set(pool, q_a_.as<float>(), T, s_.q_lora, static_cast<size_t>(s_.q_lora));
    const MatmulJob b[] = {matmul_job(w.q_b, q_a_input_, q, static_cast<size_t>(H * QH))};
    run_shared_matmuls(pool, b);
  } else {
    const MatmulJob a[] = {matmul_job(w.q, act.input, q, static_cast<size_t>(H * QH)), matmul_job(w.kv_a, act.input, kv, static_cast<size_t>(CR))};
    run_shared_matmuls(pool, a);
  }

  // The latent is normalised, the rope parts rotated; the cache row is [c | k_pe] in F16,
  // and each query row ends with its head's rotated q_pe.
  uint16_t* cache = cache_.as<uint16_t>() + static_cast<size_t>(slot) * static_cast<size_t>(n_ctx_) * static_cast<size_t>(CR);
  pool.run(T, [&](int64_t t, int) {
    float* row = kv + t * CR;
    ops::rms_norm(row, w.kv_a_norm, s_.rms_eps, L, row);
    rope_.apply(row + L, t);
    for (int64_t i = 0; i < CR; ++i) cache[static_cast<size_t>((pos0 + t) * CR + i)] = quant::f32_to_f16(row[i]);
    for (int64_t h = 0; h < H; ++h) {
      float* pe = q + (t * H + h) * QH + s_.nope;
      rope_.apply(pe, t);
      std::copy_n(pe, R, query + (t * H + h) * CR + L);
    }
  });
  // Absorbed query: Q[h][0, L) = k_b[h] q_nope[h].
  nope_input_.set(pool, q, T * H, s_.nope, static_cast<size_t>(QH));
  run_shared_matmuls(pool, per_head_jobs(jobs_, w.k_b, nope_input_, T, query, static_cast<size_t>(CR), static_cast<size_t>(H * CR)));

  const AttentionShape shape{s_.n_head, 1, s_.cache_row(), s_.kq_scale, 0, s_.kv_lora, s_.cache_row()};
  attention(pool, shape, query, cache, cache, n_ctx_, act.positions.data(), T, o_.as<float>(), scores_.as<float>());

  // u[h] = v_b[h] o[h], then the output projection over all heads.
  o_input_.set(pool, o_.as<float>(), T * H, L, static_cast<size_t>(L));
  run_shared_matmuls(pool, per_head_jobs(jobs_, w.v_b, o_input_, T, u_.as<float>(), static_cast<size_t>(s_.v_dim), static_cast<size_t>(H * s_.v_dim)));
  u_input_.set(pool, u_.as<float>(), T, H * s_.v_dim, static_cast<size_t>(H * s_.v_dim));
  const MatmulJob out[] = {matmul_job(w.wo, u_input_, act.out.as<float>(), static_cast<size_t>(s_.n_embd))};
  run_shared_matmuls(pool, out);
}

}  // namespace epq::models
