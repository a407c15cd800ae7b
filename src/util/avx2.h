#pragma once
// Small AVX2 helpers shared by the kernels.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "util/exp_lanes.h"

namespace epq {

// The sum of the 4 lanes: (0 + 2) + (1 + 3).
inline float hsum(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The sum of the 8 lanes.
inline float hsum(__m256 v) { return hsum(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))); }

// The sum of the 4 lanes.
inline double hsum(__m256d v) {
  const __m128d pairs = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(pairs, _mm_unpackhi_pd(pairs, pairs)));
}

// Asks for the cache lines of [p, p + bytes) (into L1).
inline void prefetch_lines(const void* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(static_cast<const char*>(p) + off, _MM_HINT_T0);
}

// 8 F16 values to floats.
inline __m256 load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// exp_lanes on 8 lanes. Internal linkage, as exp_lanes: a copy compiled into an AVX-512
// file must not be the one AVX2 code calls.
namespace {

struct Avx2ExpOps {
  using V = __m256;
  using I = __m256i;
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
  static V round(V x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static I to_int(V x) { return _mm256_cvtps_epi32(x); }
  static I half(I k) { return _mm256_srai_epi32(k, 1); }
  static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static V pow2(I k) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23)); }
  static V outside(V x, float lo, float hi, V y) {
    const V too_small = _mm256_cmp_ps(x, set1(lo), _CMP_LT_OQ), too_large = _mm256_cmp_ps(x, set1(hi), _CMP_GT_OQ);
    return _mm256_blendv_ps(_mm256_andnot_ps(too_small, y), set1(INFINITY), too_large);
  }
};

inline __m256 exp8(__m256 x) { return exp_lanes<Avx2ExpOps>(x); }

}  // namespace

}  // namespace epq
