#include "models/gated_delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/delta_rule.h"
#include "core/matmul.h"
#include "core/ops.h"
#include "util/error.h"

namespace epq::models {

DeltaNetWeights bind_delta_net(const WeightBinder& w, int layer, const DeltaNetShape& s) {
  const std::string blk = "blk." + std::to_string(layer) + ".";
  DeltaNetWeights d;
  d.qkv = w.matrix(layer_tensor(layer, "attn_qkv"), s.n_embd, s.conv_dim());
  d.gate = w.matrix(layer_tensor(layer, "attn_gate"), s.n_embd, s.value_dim());
  d.beta = w.matrix(layer_tensor(layer, "ssm_beta"), s.n_embd, s.n_v_heads);
  d.alpha = w.matrix(layer_tensor(layer, "ssm_alpha"), s.n_embd, s.n_v_heads);
  d.out = w.matrix(layer_tensor(layer, "ssm_out"), s.value_dim(), s.n_embd);
  const Matrix conv = w.matrix(layer_tensor(layer, "ssm_conv1d"), s.conv_kernel, s.conv_dim());
  if (conv.type != quant::Type::F32) fail("{}: tensor '{}' must be F32", w.file().path(), layer_tensor(layer, "ssm_conv1d"));
  d.conv = reinterpret_cast<const float*>(conv.data);
  d.dt_bias = w.vector(blk + "ssm_dt.bias", s.n_v_heads);
  d.a = w.vector(blk + "ssm_a", s.n_v_heads);
  d.norm = w.vector(layer_tensor(layer, "ssm_norm"), s.head_dim);
  return d;
}

GatedDeltaNet::GatedDeltaNet(StateAllocator& alloc, const DeltaNetShape& shape, int n_layers, int max_tokens, int n_threads)
    : s_(shape) {
  const size_t f = sizeof(float), T = static_cast<size_t>(max_tokens);
  const size_t conv_dim = static_cast<size_t>(s_.conv_dim()), value_dim = static_cast<size_t>(s_.value_dim());
  state_ = alloc.take(static_cast<size_t>(n_layers) * s_.state_floats() * f);
  qkv_ = alloc.take(T * conv_dim * f);
  conv_in_ = alloc.take((T + static_cast<size_t>(s_.conv_kernel) - 1) * conv_dim * f);
  z_ = alloc.take(T * value_dim * f);
  beta_ = alloc.take(T * static_cast<size_t>(s_.n_v_heads) * f);
  alpha_ = alloc.take(T * static_cast<size_t>(s_.n_v_heads) * f);
  o_ = alloc.take(T * value_dim * f);
  if (s_.chunked) scratch_ = alloc.take(static_cast<size_t>(n_threads) * delta_rule_chunk_scratch(s_.head_dim) * f);
  o_input_ = alloc.input(max_tokens, s_.value_dim());
}

void GatedDeltaNet::reset() { std::memset(state_.data(), 0, state_.size()); }

void GatedDeltaNet::forward(ThreadPool& pool, const DeltaNetWeights& w, int slot, Activations& act, int64_t T) {
  const int64_t K = s_.conv_kernel, S = s_.head_dim, Hk = s_.n_k_heads, Hv = s_.n_v_heads;
  const int64_t CD = s_.conv_dim(), KD = s_.key_dim(), VD = s_.value_dim();
  float* conv_state = state_.as<float>() + static_cast<size_t>(slot) * s_.state_floats();
  float* heads_state = conv_state + (K - 1) * CD;
  float* conv_in = conv_in_.as<float>();  // [K-1 + T][conv_dim]: the past K-1 inputs, then this batch's

  const MatmulJob proj[] = {matmul_job(w.qkv, act.input, conv_in + (K - 1) * CD, static_cast<size_t>(CD)),
                            matmul_job(w.gate, act.input, z_.as<float>(), static_cast<size_t>(VD)),
                            matmul_job(w.beta, act.input, beta_.as<float>(), static_cast<size_t>(Hv)),
                            matmul_job(w.alpha, act.input, alpha_.as<float>(), static_cast<size_t>(Hv))};
  std::copy_n(conv_state, (K - 1) * CD, conv_in);
  run_shared_matmuls(pool, proj);
  std::copy_n(conv_in + T * CD, (K - 1) * CD, conv_state);  // the last K-1 inputs, for the next call

  // Causal depthwise conv and SiLU, then per-head L2 norms (q also scaled by 1/sqrt(S)),
  // beta = sigmoid(.) and g = softplus(alpha + dt_bias) * a.
  float* u = qkv_.as<float>();
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(S));
  pool.run(T, [&](int64_t t, int) {
    float* ut = u + t * CD;
    for (int64_t c = 0; c < CD; ++c) {
      const float* taps = w.conv + c * K;
      float sum = 0;
      for (int64_t i = 0; i < K; ++i) sum += taps[i] * conv_in[(t + i) * CD + c];
      ut[c] = sum / (1.0f + std::exp(-sum));
    }
    for (int64_t h = 0; h < 2 * Hk; ++h) ops::l2_norm(ut + h * S, s_.rms_eps, S);
    for (int64_t i = 0; i < KD; ++i) ut[i] *= q_scale;
    for (int64_t h = 0; h < Hv; ++h) {
      float& b = beta_.as<float>()[t * Hv + h];
      b = ops::sigmoid(b);
      float& g = alpha_.as<float>()[t * Hv + h];
      g = ops::softplus(g + w.dt_bias[h]) * w.a[h];
    }
  });

  // The delta rule per value head; head h reads key head h mod Hk.
  const size_t scratch_floats = delta_rule_chunk_scratch(static_cast<int>(S));
  pool.run(Hv, [&](int64_t h, int thread) {
    const int64_t hk = h % Hk;
    const DeltaRuleInput in{u + hk * S,         u + KD + hk * S, u + 2 * KD + h * S, alpha_.as<float>() + h, beta_.as<float>() + h,
                            static_cast<size_t>(CD), static_cast<size_t>(CD), static_cast<size_t>(Hv)};
    float* state = heads_state + h * S * S;
    float* o = o_.as<float>() + h * S;
    if (T == 1 || !s_.chunked) {
      delta_rule_recurrent(in, T, static_cast<int>(S), state, o, static_cast<size_t>(VD));
    } else {
      delta_rule_chunked(in, T, static_cast<int>(S), state, o, static_cast<size_t>(VD),
                         scratch_.as<float>() + static_cast<size_t>(thread) * scratch_floats);
    }
  });

  // Gated output norm, then the output projection.
  pool.run(T, [&](int64_t t, int) {
    for (int64_t h = 0; h < Hv; ++h) {
      float* o = o_.as<float>() + t * VD + h * S;
      const float* z = z_.as<float>() + t * VD + h * S;
      ops::rms_norm(o, w.norm, s_.rms_eps, S, o);
      for (int64_t j = 0; j < S; ++j) o[j] *= z[j] / (1.0f + std::exp(-z[j]));
    }
  });
  o_input_.set(pool, o_.as<float>(), T, VD, static_cast<size_t>(VD));
  const MatmulJob out[] = {matmul_job(w.out, o_input_, act.out.as<float>(), static_cast<size_t>(s_.n_embd))};
  run_shared_matmuls(pool, out);
}

}  // namespace epq::models
