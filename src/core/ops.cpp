#include "core/ops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "util/avx2.h"

namespace epq::ops {

void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out) {
  // The squares are exact in double, so the fused multiply-adds round only the sums:
  // eight running sums (lane i sums elements i, i + 8, ...), then the tail.
  __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    low = _mm256_fmadd_pd(a, a, low);
    high = _mm256_fmadd_pd(b, b, high);
  }
  double sum = hsum(_mm256_add_pd(low, high));
  for (; i < n; ++i) sum += double{x[i]} * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  // (x * scale) * weight, eight at a time, then one by one: the same two roundings either way.
  const __m256 scale8 = _mm256_set1_ps(scale);
  i = 0;
  if (weight == nullptr) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), scale8));
    for (; i < n; ++i) out[i] = x[i] * scale;
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), scale8), _mm256_loadu_ps(weight + i)));
    for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
  }
}

void add(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) x[i] += y[i];
}

void add_scaled(float* x, const float* y, float a, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_mul_ps(_mm256_loadu_ps(y + i), av)));
  for (; i < n; ++i) x[i] += y[i] * a;
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
  // silu(g) = g / (1 + e^-g), with exp8; a last partial group goes through a padded copy.
  auto eight = [](const float* g, const float* u, float* o) {
    const __m256 gv = _mm256_loadu_ps(g);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
    _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(u)));
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) eight(gate + i, up + i, out + i);
  if (i < n) {
    float g[8] = {}, u[8] = {}, o[8];
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    eight(g, u, o);
    std::copy(o, o + (n - i), out + i);
  }
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

void mul_sigmoid(float* x, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= sigmoid(gate[i]);
}

void l2_norm(float* x, float eps, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double{x[i]} * x[i];
  const float scale = 1.0f / std::max(std::sqrt(static_cast<float>(sum)), eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace epq::ops
