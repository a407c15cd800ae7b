#pragma once
// Small AVX2 helpers shared by the kernels.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

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

// e^x in each lane, within 2 ulp of the exact value for x in [-87, 88]; 0 below -87.33
// (where e^x would be subnormal), +inf above 88.72. The exponent is split off as
// x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so n ln2 is exact), e^r comes from
// the Cephes degree-7 polynomial, and 2^n is built in the exponent bits.
inline __m256 exp8(__m256 x) {
  const __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ);
  const __m256 too_large = _mm256_cmp_ps(x, _mm256_set1_ps(88.72283f), _CMP_GT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.72283f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // n is in [-126, 128]: 2^n as n + 127 in the exponent field, in two steps so that n = 128 fits.
  const __m256i n_int = _mm256_cvtps_epi32(n);
  const __m256i half_n = _mm256_srai_epi32(n_int, 1);
  const __m256i rest = _mm256_sub_epi32(n_int, half_n);
  const __m256 two_half = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half_n, _mm256_set1_epi32(127)), 23));
  const __m256 two_rest = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, _mm256_set1_epi32(127)), 23));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, two_half), two_rest);
  return _mm256_blendv_ps(_mm256_andnot_ps(too_small, y), _mm256_set1_ps(INFINITY), too_large);
}

}  // namespace epq
