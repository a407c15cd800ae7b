#include "core/attention.h"

#include <algorithm>

#include "core/attend_kernel.h"
#include "quant/dot.h"

namespace epq {
namespace {

constexpr int kScoresPerPosition = 8;  // heads computed together at most

// One KV head's score and value vectors at 8 lanes a head.
struct Avx2Lanes {
  using V = __m256;
  static constexpr int kHeads = 1, kDims = 8, kValueVectors = 1, kPositions = 1;  // 8 heads: 8 of the 16 registers
  static V keys(const uint16_t* p) { return load_f16(p); }
  static V values(const uint16_t* p) { return load_f16(p); }
  static void split(V v, __m256* out) { out[0] = v; }
  template <int G>
  static __m256 head_sums(const V* v) { return lane_sums<G>(v); }
  static V repeat(__m256 v) { return v; }
  static V exp(V v) { return exp8(v); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
};

int64_t visible_positions(const AttentionShape& s, int64_t cache_rows) {
  return s.window > 0 ? std::min<int64_t>(s.window, cache_rows) : cache_rows;
}

// Each thread's scratch: the scores of up to 8 heads at every visible position, then up
// to 8 heads' packed queries.
size_t thread_scratch_floats(const AttentionShape& s, int64_t cache_rows) {
  return static_cast<size_t>(visible_positions(s, cache_rows) + s.head_dim) * kScoresPerPosition;
}

using AttendGroup = void (*)(int G, const AttendTask& task);

// The AVX-512 kernel where the active dot kernels are an AVX-512 set (so EPQ_KERNELS=avx2
// takes AVX2 here too), for whole pairs of heads and 16-dimension value vectors.
AttendGroup choose_kernel(int slice, int Dv) {
  const bool avx512 = quant::is_avx512(quant::active_kernels());
  return avx512 && slice % 2 == 0 && Dv % 16 == 0 ? attend_avx512 : attend_avx2;
}

}  // namespace

void attend_avx2(int G, const AttendTask& task) {
  switch (G) {
    case 8: return attend<8, Avx2Lanes>(task);
    case 4: return attend<4, Avx2Lanes>(task);
    case 2: return attend<2, Avx2Lanes>(task);
    default: return attend<1, Avx2Lanes>(task);
  }
}

size_t attention_scratch_floats(const AttentionShape& s, int64_t cache_rows, int n_threads) {
  return static_cast<size_t>(n_threads) * thread_scratch_floats(s, cache_rows);
}

void attention(ThreadPool& pool, const AttentionShape& s, const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
               int64_t cache_rows, const int32_t* positions, int64_t n_tokens, float* out, float* scratch) {
  const int64_t max_visible = visible_positions(s, cache_rows);
  const int D = s.head_dim, Dv = s.dv();
  const size_t q_stride = static_cast<size_t>(s.n_head) * D, out_stride = static_cast<size_t>(s.n_head) * Dv;
  const int group = s.n_head / s.n_head_kv;
  // One task per (token, KV head, slice of its query heads); slices of 8, 4, 2 or 1 heads.
  const int slice = group % 8 == 0 ? 8 : group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;
  const int slices = group / slice;
  const AttendGroup kernel = choose_kernel(slice, Dv);
  const size_t thread_scratch = thread_scratch_floats(s, cache_rows);
  pool.run(n_tokens * s.n_head_kv * slices, [&](int64_t task, int thread) {
    const int64_t t = task / (s.n_head_kv * slices);
    const int g = static_cast<int>(task / slices % s.n_head_kv);
    const size_t h0 = static_cast<size_t>(g * group + static_cast<int>(task % slices) * slice);
    const int64_t last = positions[t], first = s.window > 0 ? std::max<int64_t>(0, last - s.window + 1) : 0;
    float* scores = scratch + static_cast<size_t>(thread) * thread_scratch;
    kernel(slice, {.q = q + static_cast<size_t>(t) * q_stride + h0 * D,
                   .k = k_cache + s.k_at(g, 0, cache_rows),
                   .v = v_cache + s.v_at(g, 0, cache_rows),
                   .k_stride = s.k_row(),
                   .v_stride = s.v_row(),
                   .D = D,
                   .Dv = Dv,
                   .first = first % cache_rows,
                   .n_pos = last - first + 1,
                   .rows = cache_rows,
                   .scale = s.scale,
                   .scores = scores,
                   .packed_q = scores + max_visible * kScoresPerPosition,
                   .out = out + static_cast<size_t>(t) * out_stride + h0 * Dv});
  });
}

}  // namespace epq
