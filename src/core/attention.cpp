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
constexpr int kScoresPerPosition = 8;  // heads computed together at most

// Lane i holds the sum of the 8 lanes of v[i], for i < G (G = 1, 2, 4 or 8); lanes from
// G on are not meaningful. Each sum is ((0+1)+(2+3))+((4+5)+(6+7)) whatever G.
template <int G>
__m256 lane_sums(const __m256* v) {
  auto at = [&](int i) { return v[i % G]; };
  const __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(at(0), at(1)), _mm256_hadd_ps(at(2), at(3)));
  const __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(at(4), at(5)), _mm256_hadd_ps(at(6), at(7)));
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// A mask of the first G of 8 lanes.
template <int G>
__m256i first_lanes() {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(G), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The n_pos visible cache rows of a query, oldest first: the j-th is row first + j of a
// ring of `rows` rows.
struct VisibleRows {
  int64_t first, n_pos, rows;
  size_t operator()(int64_t j) const {
    const int64_t r = first + j;
    return static_cast<size_t>(r < rows ? r : r - rows);
  }
};

// Attention of one query token for G query heads that share a KV head: q holds G heads of
// D floats and out G heads of Dv; k and v point at the KV head in cache row 0. Every K and V row is
// read once for all G heads, and the accumulators (G per pass) stay in registers.
// scores holds visible position j's G scores at j * G; head i's arithmetic happens in
// lane i and is the same whatever G or wherever the rows sit in the ring.
template <int G>
void attend(const float* q, const uint16_t* k, const uint16_t* v, size_t k_stride, size_t v_stride, int D, int Dv,
            const VisibleRows& row, float scale, float* scores, float* out) {
  const int64_t n_pos = row.n_pos;
  const __m256i heads = first_lanes<G>();
  __m256 max = _mm256_set1_ps(-INFINITY);
  for (int64_t j = 0; j < n_pos; ++j) {
    const uint16_t* kj = k + row(j) * k_stride;
    prefetch_lines(k + row(std::min(j + kKeyPrefetchRows, n_pos - 1)) * k_stride, static_cast<size_t>(D) * sizeof(uint16_t));
    __m256 acc[G];
    for (int i = 0; i < G; ++i) acc[i] = _mm256_setzero_ps();
    for (int d = 0; d < D; d += 8) {
      const __m256 kv = load_f16(kj + d);
      for (int i = 0; i < G; ++i) acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(q + i * D + d), kv, acc[i]);
    }
    const __m256 s = _mm256_mul_ps(lane_sums<G>(acc), _mm256_set1_ps(scale));
    _mm256_maskstore_ps(scores + j * G, heads, s);
    max = _mm256_max_ps(max, s);
  }
  // e^(score - max) in place, and its sum over positions in double.
  __m256d sum_low = _mm256_setzero_pd(), sum_high = _mm256_setzero_pd();
  for (int64_t j = 0; j < n_pos; ++j) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(scores + j * G, heads), max));
    _mm256_maskstore_ps(scores + j * G, heads, e);
    sum_low = _mm256_add_pd(sum_low, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    sum_high = _mm256_add_pd(sum_high, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double sums[8];
  _mm256_store_pd(sums, sum_low);
  _mm256_store_pd(sums + 4, sum_high);
  float inv[G];
  for (int i = 0; i < G; ++i) inv[i] = static_cast<float>(1.0 / sums[i]);
  // The weighted sum of V, 8 dimensions at a time over all positions, then / the sum.
  for (int d = 0; d < Dv; d += 8) {
    __m256 acc[G];
    for (int i = 0; i < G; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n_pos; ++j) {
      if (d % kHalvesPerLine == 0) {
        prefetch_lines(v + row(std::min(j + kValuePrefetchRows, n_pos - 1)) * v_stride + d, 1);  // dimensions d..d+31
      }
      const __m256 vv = load_f16(v + row(j) * v_stride + d);
      for (int i = 0; i < G; ++i) acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(scores + j * G + i), vv, acc[i]);
    }
    for (int i = 0; i < G; ++i) _mm256_storeu_ps(out + i * Dv + d, _mm256_mul_ps(acc[i], _mm256_set1_ps(inv[i])));
  }
}

int64_t visible_positions(const AttentionShape& s, int64_t cache_rows) {
  return s.window > 0 ? std::min<int64_t>(s.window, cache_rows) : cache_rows;
}

}  // namespace

size_t attention_scratch_floats(const AttentionShape& s, int64_t cache_rows, int n_threads) {
  return static_cast<size_t>(n_threads) * static_cast<size_t>(visible_positions(s, cache_rows)) * kScoresPerPosition;
}

void attention(ThreadPool& pool, const AttentionShape& s, const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
               int64_t cache_rows, const int32_t* positions, int64_t n_tokens, float* out, float* scratch) {
  const int64_t max_visible = visible_positions(s, cache_rows);
  const int D = s.head_dim, Dv = s.dv();
  const size_t q_stride = static_cast<size_t>(s.n_head) * D, out_stride = static_cast<size_t>(s.n_head) * Dv;
  const size_t k_stride = s.k_row(), v_stride = s.v_row();
  const int group = s.n_head / s.n_head_kv;
  // One task per (token, KV head, slice of its query heads); slices of 8, 4, 2 or 1 heads.
  const int slice = group % 8 == 0 ? 8 : group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;
  const int slices = group / slice;
  pool.run(n_tokens * s.n_head_kv * slices, [&](int64_t task, int thread) {
    const int64_t t = task / (s.n_head_kv * slices);
    const int g = static_cast<int>(task / slices % s.n_head_kv);
    const size_t h0 = static_cast<size_t>(g * group + static_cast<int>(task % slices) * slice);
    const int64_t last = positions[t], first = s.window > 0 ? std::max<int64_t>(0, last - s.window + 1) : 0;
    const VisibleRows rows{first % cache_rows, last - first + 1, cache_rows};
    const float* qh = q + static_cast<size_t>(t) * q_stride + h0 * D;
    float* oh = out + static_cast<size_t>(t) * out_stride + h0 * Dv;
    const uint16_t* k = k_cache + static_cast<size_t>(g) * D;
    const uint16_t* v = v_cache + static_cast<size_t>(g) * Dv;
    float* scores = scratch + static_cast<size_t>(thread) * static_cast<size_t>(max_visible) * kScoresPerPosition;
    switch (slice) {
      case 8: return attend<8>(qh, k, v, k_stride, v_stride, D, Dv, rows, s.scale, scores, oh);
      case 4: return attend<4>(qh, k, v, k_stride, v_stride, D, Dv, rows, s.scale, scores, oh);
      case 2: return attend<2>(qh, k, v, k_stride, v_stride, D, Dv, rows, s.scale, scores, oh);
      default: return attend<1>(qh, k, v, k_stride, v_stride, D, Dv, rows, s.scale, scores, oh);
    }
  });
}

}  // namespace epq
