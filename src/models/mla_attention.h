#pragma once
// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2, Xing4.0), in the absorbed form
// llama.cpp runs. With H heads, latent rank L = kv_lora, rope part R and NOPE = the rest
// of a query head:
//   q  = q_b rms_norm(q_a h)  (or wq h without q_lora)   per head [q_nope (NOPE) | q_pe (R)]
//   kv = kv_a h:  c = rms_norm(kv[0, L)) (the latent),  k_pe = kv[L, L + R) (one per token)
//   rope (NORM pairs) on q_pe of every head and on k_pe
//   cache row per token = [c | k_pe]  (L + R values; the values are its first L)
//   Q[h] = [k_b[h] q_nope[h] | q_pe[h]];  score = kq_scale Q[h] . row
//   o[h] = softmax-weighted sum of c;  u[h] = v_b[h] o[h];  out = wo [u[0] .. u[H-1]]
// kq_scale = mscale^2 / sqrt(NOPE + R), YaRN's mscale (1 without YaRN). The cache grows by
// L + R values per token and layer, whatever the head count.
#include <cstdint>
#include <vector>

#include "core/matmul.h"
#include "core/matrix.h"
#include "core/quantized_input.h"
#include "core/rope.h"
#include "models/activations.h"
#include "models/hparams.h"
#include "models/state_allocator.h"
#include "models/weight_binder.h"

namespace epq::models {

struct MlaShape {
  int n_embd = 0, n_head = 0, q_lora = 0, kv_lora = 0, nope = 0, rope_dims = 0, v_dim = 0;
  float rms_eps = 1e-6f, kq_scale = 1;
  RopeParams rope;  // NORM pairs over rope_dims
  int q_head() const { return nope + rope_dims; }
  int cache_row() const { return kv_lora + rope_dims; }
};

// "<arch>.attention.*" MLA keys and the rope with its YaRN scale; refuses legacy files
// without attn_k_b / attn_v_b (key_length_mla) in one line.
MlaShape read_mla_shape(const HparamReader& r, int n_embd, int n_ctx_train, float rms_eps);

struct MlaWeights {
  Matrix q_a, q_b, q;  // q_a and q_b with q_lora, else q
  const float* q_a_norm = nullptr;
  Matrix kv_a;
  const float* kv_a_norm = nullptr;
  std::vector<Matrix> k_b, v_b;  // per head: [NOPE -> L] and [L -> v_dim]
  Matrix wo;
};

MlaWeights bind_mla(const WeightBinder& w, int layer, const MlaShape& shape);

class MlaAttention {
 public:
  MlaAttention(StateAllocator& alloc, const MlaShape& shape, int n_layers, int n_ctx, int max_tokens, int n_threads);
  void prepare(const Activations& act, int64_t n_tokens);
  // act.out = attention over act.input for cache slot `slot`; positions pos0.. enter the cache.
  void forward(ThreadPool& pool, const MlaWeights& w, int slot, Activations& act, int64_t n_tokens, int32_t pos0);

 private:
  MlaShape s_;
  int n_ctx_;
  Buffer cache_;            // [slot][position][cache_row] F16
  Buffer q_a_, q_, kv_;     // [T][q_lora], [T][H][q_head], [T][cache_row]
  Buffer query_, o_, u_;    // [T][H][cache_row], [T][H][L], [T][H][v_dim]
  Buffer scores_;
  QuantizedInput q_a_input_, nope_input_, o_input_, u_input_;
  std::vector<MatmulJob> jobs_;  // the per-head products
  RopeTable rope_;
};

}  // namespace epq::models
