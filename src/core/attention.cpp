#include "core/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "util/avx2.h"

namespace epq {
namespace {

// A long context's cache rows come from DRAM, one KV head's row (256 bytes) every
// kv_stride: without prefetches the loops below wait on each row in turn. Rows this far
// ahead (at most the last) are asked for.
constexpr int64_t kKeyPrefetchRows = 8;     // a row's scores take ~100 cycles
constexpr int64_t kValuePrefetchRows = 32;  // a row's 8 dimensions take a few cycles
constexpr int kHalvesPerLine = 32;

// p[j] = e^(p[j] - max) / sum over j of the same, 8 positions at a time (the sum in double).
void softmax_in_place(float* p, int64_t n, float max) {
  const __m256 m = _mm256_set1_ps(max);
  __m256d sum = _mm256_setzero_pd();
  for (int64_t j = 0; j < n; j += 8) {
    const int64_t lanes = std::min<int64_t>(8, n - j);
    alignas(32) float x[8];
    std::fill(x, x + 8, -INFINITY);  // e^-inf = 0: lanes past the end add nothing
    std::copy(p + j, p + j + lanes, x);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(x), m));
    _mm256_store_ps(x, e);
    std::copy(x, x + lanes, p + j);
    sum = _mm256_add_pd(sum, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(e)), _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1))));
  }
  const __m128d pairs = _mm_add_pd(_mm256_castpd256_pd128(sum), _mm256_extractf128_pd(sum, 1));
  const float inv = static_cast<float>(1.0 / _mm_cvtsd_f64(_mm_add_sd(pairs, _mm_unpackhi_pd(pairs, pairs))));
  for (int64_t j = 0; j < n; ++j) p[j] *= inv;
}

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
    prefetch_lines(k + static_cast<size_t>(std::min(j + kKeyPrefetchRows, n_pos - 1)) * kv_stride, static_cast<size_t>(D) * sizeof(uint16_t));
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
  for (int i = 0; i < G; ++i) softmax_in_place(scores + i * n_pos, n_pos, max[i]);
  // The weighted sum of V, 8 dimensions at a time over all positions.
  for (int d = 0; d < D; d += 8) {
    __m256 acc[G];
    for (int i = 0; i < G; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n_pos; ++j) {
      if (d % kHalvesPerLine == 0) {
        const size_t ahead = static_cast<size_t>(std::min(j + kValuePrefetchRows, n_pos - 1));
        prefetch_lines(v + ahead * kv_stride + d, 1);  // the line holding dimensions d..d+31
      }
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
