#include "core/ops.h"

#include <algorithm>
#include <cmath>

namespace epq::ops {

void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double{x[i]} * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void softmax(float* x, int64_t n) {
  const float max = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace epq::ops
