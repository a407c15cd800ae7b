#pragma once
// Manifold-constrained hyper-connections (Xing4.0): the residual stream is n streams X[s]
// of n_embd floats (F32), and every sub-layer (attention, FFN) reads and writes them
// through its own fn [n E, 2n + n^2], base [2n + n^2] and scale [3]:
//   f = rms_norm(X[0] .. X[n-1]) over all n E values, without a weight;  m = fn f
//   pre[s]  = sigmoid(m[s] scale[0] + base[s])
//   post[d] = 2 sigmoid(m[n + d] scale[1] + base[n + d])
//   C[d][s] = exp(L - max_s L) with L = clamp(m[2n + n d + s] scale[2] + base[2n + n d + s], -30, 30),
//             then `iterations` times: each row divided by (its sum + eps), then each
//             column by (its sum + eps)
//   sub-layer input = sum_s pre[s] X[s];  with its output y:  X'[d] = post[d] y + sum_s C[d][s] X[s]
// There is no plain residual add; the model's hidden state is the mean of the streams.
#include <cstdint>

#include "core/matrix.h"
#include "core/quantized_input.h"
#include "models/activations.h"
#include "models/state_allocator.h"
#include "models/weight_binder.h"

namespace epq::models {

struct HcShape {
  int n_embd = 0, n_streams = 4, iterations = 20;
  float eps = 1e-6f, rms_eps = 1e-6f;
  int mixes() const { return 2 * n_streams + n_streams * n_streams; }
};

struct HcWeights {
  Matrix fn;
  const float* base = nullptr;
  const float* scale = nullptr;
};

// Binds blk.<layer>.hc_<part>_{fn,base,scale} (part: "attn" or "ffn").
HcWeights bind_hc(const WeightBinder& w, int layer, const char* part, const HcShape& shape);

class HyperConnections {
 public:
  HyperConnections(StateAllocator& alloc, const HcShape& shape, int max_tokens);
  // Every stream starts as act.x (the embeddings).
  void start(Activations& act, int64_t n_tokens);
  // act.x = the sub-layer's input, sum_s pre[s] X[s]; remembers post and C for finish_sublayer.
  void begin_sublayer(ThreadPool& pool, const HcWeights& w, Activations& act, int64_t n_tokens);
  // X[d] = post[d] act.out + sum_s C[d][s] X[s].
  void end_sublayer(ThreadPool& pool, const Activations& act, int64_t n_tokens);
  // act.x = the mean of the streams.
  void finish(Activations& act, int64_t n_tokens) const;

 private:
  HcShape s_;
  Buffer streams_;  // [T][n][E]
  Buffer normed_;   // [T][n E]
  Buffer mix_;      // [T][mixes]: m, then pre, post and C in place
  QuantizedInput normed_input_;
};

}  // namespace epq::models
