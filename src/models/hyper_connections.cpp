#include "models/hyper_connections.h"

#include <algorithm>
#include <cmath>

#include "core/matmul.h"
#include "core/ops.h"

namespace epq::models {

HcWeights bind_hc(const WeightBinder& w, int layer, const char* part, const HcShape& s) {
  const std::string prefix = std::string("hc_") + part;
  HcWeights h;
  h.fn = w.matrix(layer_tensor(layer, (prefix + "_fn").c_str()), int64_t{s.n_streams} * s.n_embd, s.mixes());
  h.base = w.vector(layer_tensor(layer, (prefix + "_base").c_str()), s.mixes());
  h.scale = w.vector(layer_tensor(layer, (prefix + "_scale").c_str()), 3);
  return h;
}

HyperConnections::HyperConnections(StateAllocator& alloc, const HcShape& shape, int max_tokens) : s_(shape) {
  const size_t T = static_cast<size_t>(max_tokens), width = static_cast<size_t>(s_.n_streams) * static_cast<size_t>(s_.n_embd);
  streams_ = alloc.take(T * width * sizeof(float));
  normed_ = alloc.take(T * width * sizeof(float));
  mix_ = alloc.take(T * static_cast<size_t>(s_.mixes()) * sizeof(float));
  normed_input_ = alloc.input(max_tokens, static_cast<int64_t>(width));
}

void HyperConnections::start(Activations& act, int64_t T) {
  const int64_t E = s_.n_embd, n = s_.n_streams;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < n; ++i) std::copy_n(act.x.as<float>() + t * E, E, streams_.as<float>() + (t * n + i) * E);
  }
}

void HyperConnections::begin_sublayer(ThreadPool& pool, const HcWeights& w, Activations& act, int64_t T) {
  const int64_t E = s_.n_embd, n = s_.n_streams, width = n * E, M = s_.mixes();
  pool.run(T, [&](int64_t t, int) {
    ops::rms_norm(streams_.as<float>() + t * width, nullptr, s_.rms_eps, width, normed_.as<float>() + t * width);
  });
  normed_input_.set(pool, normed_.as<float>(), T, width, static_cast<size_t>(width));
  const MatmulJob job[] = {matmul_job(w.fn, normed_input_, mix_.as<float>(), static_cast<size_t>(M))};
  run_shared_matmuls(pool, job);
  pool.run(T, [&](int64_t t, int) {
    float* m = mix_.as<float>() + t * M;
    for (int64_t s = 0; s < n; ++s) m[s] = ops::sigmoid(m[s] * w.scale[0] + w.base[s]);                    // pre
    for (int64_t d = n; d < 2 * n; ++d) m[d] = 2 * ops::sigmoid(m[d] * w.scale[1] + w.base[d]);            // post
    float* c = m + 2 * n;                                                                                  // C[d][s] at d n + s
    for (int64_t d = 0; d < n; ++d) {
      float* row = c + d * n;
      for (int64_t s = 0; s < n; ++s) row[s] = std::clamp(row[s] * w.scale[2] + w.base[2 * n + d * n + s], -30.0f, 30.0f);
      const float max = *std::max_element(row, row + n);
      for (int64_t s = 0; s < n; ++s) row[s] = std::exp(row[s] - max);
    }
    for (int it = 0; it < s_.iterations; ++it) {
      for (int64_t d = 0; d < n; ++d) {
        float sum = 0;
        for (int64_t s = 0; s < n; ++s) sum += c[d * n + s];
        for (int64_t s = 0; s < n; ++s) c[d * n + s] /= sum + s_.eps;
      }
      for (int64_t s = 0; s < n; ++s) {
        float sum = 0;
        for (int64_t d = 0; d < n; ++d) sum += c[d * n + s];
        for (int64_t d = 0; d < n; ++d) c[d * n + s] /= sum + s_.eps;
      }
    }
    float* x = act.x.as<float>() + t * E;
    const float* X = streams_.as<float>() + t * width;
    std::fill_n(x, E, 0.0f);
    for (int64_t s = 0; s < n; ++s) ops::add_scaled(x, X + s * E, m[s], E);
  });
}

void HyperConnections::end_sublayer(ThreadPool& pool, const Activations& act, int64_t T) {
  const int64_t E = s_.n_embd, n = s_.n_streams, width = n * E, M = s_.mixes();
  pool.run(T, [&](int64_t t, int) {
    const float* m = mix_.as<float>() + t * M;
    const float* y = act.out.as<float>() + t * E;
    float* X = streams_.as<float>() + t * width;
    float* next = normed_.as<float>() + t * width;  // free until the next begin_sublayer
    for (int64_t d = 0; d < n; ++d) {
      float* out = next + d * E;
      for (int64_t i = 0; i < E; ++i) out[i] = m[n + d] * y[i];
      for (int64_t s = 0; s < n; ++s) ops::add_scaled(out, X + s * E, m[2 * n + d * n + s], E);
    }
    std::copy_n(next, width, X);
  });
}

void HyperConnections::finish(Activations& act, int64_t T) const {
  const int64_t E = s_.n_embd, n = s_.n_streams;
  for (int64_t t = 0; t < T; ++t) {
    float* x = act.x.as<float>() + t * E;
    const float* X = streams_.as<float>() + t * n * E;
    for (int64_t i = 0; i < E; ++i) {
      float sum = 0;
      for (int64_t s = 0; s < n; ++s) sum += X[s * E + i];
      x[i] = sum / static_cast<float>(n);
    }
  }
}

}  // namespace epq::models
