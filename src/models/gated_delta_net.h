#pragma once
// Gated DeltaNet linear attention, the recurrent mixer of qwen35moe (Qwen3.5 / 3.6):
//   qkv = attn_qkv h;  z = attn_gate h;  beta = sigmoid(ssm_beta h);  alpha = ssm_alpha h
//   g = softplus(alpha + ssm_dt.bias) * ssm_a              (ssm_a = -exp(A_log) < 0)
//   u = silu(causal depthwise conv of qkv, kernel K, over the last K-1 inputs and this one)
//   q, k, v = u split [Hk x S | Hk x S | Hv x S];  q, k L2-normalised per head; q /= sqrt(S)
//   per value head h (key head h mod Hk, the converter's tiled order): the gated delta
//     rule (core/delta_rule.h), recurrent for one token, chunked for a batch
//   o_h = rms_norm(o_h, ssm_norm) * silu(z_h);  out = ssm_out o
// The block owns, per layer slot, the conv state (the last K-1 projected inputs) and
// the S x S state of every value head: state that cannot be rolled back, only saved
// and restored whole.
#include <cstdint>

#include "core/matrix.h"
#include "models/activations.h"
#include "models/weight_binder.h"

namespace epq::models {

struct DeltaNetShape {
  int n_embd = 0;
  int conv_kernel = 0;  // K
  int head_dim = 0;     // S = key and value head dimension
  int n_k_heads = 0;    // Hk
  int n_v_heads = 0;    // Hv, a multiple of Hk
  float rms_eps = 1e-6f;
  bool chunked = false;  // batches of more than one token use the chunked rule
  int64_t key_dim() const { return int64_t{n_k_heads} * head_dim; }
  int64_t value_dim() const { return int64_t{n_v_heads} * head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  // Floats of recurrent state per layer: conv inputs and the heads' S x S matrices.
  uint64_t state_floats() const {
    return static_cast<uint64_t>(conv_kernel - 1) * static_cast<uint64_t>(conv_dim()) +
           static_cast<uint64_t>(n_v_heads) * static_cast<uint64_t>(head_dim) * static_cast<uint64_t>(head_dim);
  }
};

struct DeltaNetWeights {
  Matrix qkv, gate, beta, alpha, out;
  const float* conv = nullptr;     // [conv_dim][K], channel-major
  const float* dt_bias = nullptr;  // [Hv]
  const float* a = nullptr;        // [Hv]
  const float* norm = nullptr;     // [S]
};

DeltaNetWeights bind_delta_net(const WeightBinder& w, int layer, const DeltaNetShape& shape);

class GatedDeltaNet {
 public:
  GatedDeltaNet(StateAllocator& alloc, const DeltaNetShape& shape, int n_layers, int max_tokens, int n_threads);

  // act.out = the layer's output for act.input; advances slot `slot`'s state.
  void forward(ThreadPool& pool, const DeltaNetWeights& w, int slot, Activations& act, int64_t n_tokens);
  // Zeroes every slot's state (a new sequence).
  void reset();
  // All slots' state as bytes, to save and restore.
  uint64_t state_bytes() const { return state_.size(); }
  const uint8_t* state() const { return state_.data(); }
  uint8_t* state() { return state_.data(); }

 private:
  DeltaNetShape s_;
  Buffer state_;               // per slot: conv [K-1][conv_dim], then [Hv][S][S]
  Buffer qkv_, conv_in_, z_, beta_, alpha_, o_;
  Buffer scratch_;             // per thread, for the chunked rule (only when chunked)
  QuantizedInput o_input_;
};

}  // namespace epq::models
