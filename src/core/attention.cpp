#include "core/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "util/avx2.h"

namespace epq {
namespace {

// Attention of one query token for G query heads that share a KV head: q and out hold G
// heads of D floats; k and v point at the KV head's first cache row. Every K and V row
// is read once for all G heads, and the accumulators (G per pass) stay in registers.
// Per head, the arithmetic is the same as computing that head alone.
template <int G>
void attend(const float* q, const uint16_t* k, const uint16_t* v, size_t kv_stride, int D, int64_t n_pos, float scale,
            float* scores, float* out) {
  float max[G];
  std::fill(max, max + G, -INFINITY);
  for (int64_t j = 0; j < n_pos; ++j) {
    const uint16_t* kj = k + static_cast<size_t>(j) * kv_stride;
    __m256 acc[G];
    for (int i = 0; i < G; ++i) acc[i] = _mm256_setzero_ps();
    for (int d = 0; d < D; d += 8) {
      const __m256 kv = load_f16(kj + d);
      for (int i = 0; i < G; ++i) acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(q + i * D + d), kv, acc[i]);
    }
    for (int i = 0; i < G; ++i) {
      scores[i * n_pos + j] = hsum(acc[i]) * scale;
      max[i] = std::max(max[i], scores[i * n_pos + j]);
    }
  }
  for (int i = 0; i < G; ++i) {
    float* p = scores + i * n_pos;
    double sum = 0;
    for (int64_t j = 0; j < n_pos; ++j) {
      p[j] = std::exp(p[j] - max[i]);
      sum += p[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < n_pos; ++j) p[j] *= inv;
  }
  // The weighted sum of V, 8 dimensions at a time over all positions.
  for (int d = 0; d < D; d += 8) {
    __m256 acc[G];
    for (int i = 0; i < G; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n_pos; ++j) {
      const __m256 vv = load_f16(v + static_cast<size_t>(j) * kv_stride + d);
      for (int i = 0; i < G; ++i) acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(scores + i * n_pos + j), vv, acc[i]);
    }
    for (int i = 0; i < G; ++i) _mm256_storeu_ps(out + i * D + d, acc[i]);
  }
}

}  // namespace

void attention(ThreadPool& pool, const AttentionShape& s, const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
               const int32_t* positions, int64_t n_tokens, float* out, float* scratch, int64_t max_positions) {
  const int D = s.head_dim;
  const size_t q_stride = static_cast<size_t>(s.n_head) * D;
  const size_t kv_stride = static_cast<size_t>(s.n_head_kv) * D;
  const int group = s.n_head / s.n_head_kv;
  // One task per (token, KV head, slice of its query heads); slices of 8, 4, 2 or 1 heads.
  const int slice = group % 8 == 0 ? 8 : group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;
  const int slices = group / slice;
  pool.run(n_tokens * s.n_head_kv * slices, [&](int64_t task, int thread) {
    const int64_t t = task / (s.n_head_kv * slices);
    const int g = static_cast<int>(task / slices % s.n_head_kv);
    const size_t h0 = static_cast<size_t>(g * group + static_cast<int>(task % slices) * slice);
    const int64_t n_pos = positions[t] + 1;
    const float* qh = q + static_cast<size_t>(t) * q_stride + h0 * D;
    float* oh = out + static_cast<size_t>(t) * q_stride + h0 * D;
    const uint16_t* k = k_cache + static_cast<size_t>(g) * D;
    const uint16_t* v = v_cache + static_cast<size_t>(g) * D;
    float* scores = scratch + static_cast<size_t>(thread) * static_cast<size_t>(max_positions) * kAttentionScoresPerPosition;
    switch (slice) {
      case 8: return attend<8>(qh, k, v, kv_stride, D, n_pos, s.scale, scores, oh);
      case 4: return attend<4>(qh, k, v, kv_stride, D, n_pos, s.scale, scores, oh);
      case 2: return attend<2>(qh, k, v, kv_stride, D, n_pos, s.scale, scores, oh);
      default: return attend<1>(qh, k, v, kv_stride, D, n_pos, s.scale, scores, oh);
    }
  });
}

}  // namespace epq
