#include "core/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace epq {
namespace {

float dot_f32_f16(const float* q, const uint16_t* k, int n) {
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) {
    const __m256 kv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + i)));
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv, acc);
  }
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// out += w * v
void axpy_f16(float w, const uint16_t* v, float* out, int n) {
  const __m256 wv = _mm256_set1_ps(w);
  for (int i = 0; i < n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)));
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(wv, x, _mm256_loadu_ps(out + i)));
  }
}

}  // namespace

void attention(ThreadPool& pool, const AttentionShape& s, const float* q, const uint16_t* k_cache,
               const uint16_t* v_cache, const int32_t* positions, int64_t n_tokens, float* out, float* scratch,
               int64_t max_positions) {
  const int D = s.head_dim;
  const size_t q_stride = static_cast<size_t>(s.n_head) * D;
  const size_t kv_stride = static_cast<size_t>(s.n_head_kv) * D;
  const int group = s.n_head / s.n_head_kv;
  pool.run(n_tokens * s.n_head, [&](int64_t task, int thread) {
    const int64_t t = task / s.n_head;
    const int h = static_cast<int>(task % s.n_head);
    const int64_t n_pos = positions[t] + 1;
    const float* qh = q + static_cast<size_t>(t) * q_stride + static_cast<size_t>(h) * D;
    const size_t kv_offset = static_cast<size_t>(h / group) * D;
    float* scores = scratch + static_cast<size_t>(thread) * static_cast<size_t>(max_positions);
    float max = -INFINITY;
    for (int64_t j = 0; j < n_pos; ++j) {
      scores[j] = dot_f32_f16(qh, k_cache + static_cast<size_t>(j) * kv_stride + kv_offset, D) * s.scale;
      max = std::max(max, scores[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < n_pos; ++j) {
      scores[j] = std::exp(scores[j] - max);
      sum += scores[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    float* oh = out + static_cast<size_t>(t) * q_stride + static_cast<size_t>(h) * D;
    std::fill(oh, oh + D, 0.0f);
    for (int64_t j = 0; j < n_pos; ++j) axpy_f16(scores[j] * inv, v_cache + static_cast<size_t>(j) * kv_stride + kv_offset, oh, D);
  });
}

}  // namespace epq
