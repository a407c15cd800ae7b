// The attention kernel (core/attend_kernel.h) on 512-bit vectors: two query heads per
// vector in the score pass, 16 value dimensions per vector in the value pass. Half the
// multiply-adds of the AVX2 build, and the same bits. Written with SIMDe's names, like
// quant/dot_avx512.cpp: with AVX-512 flags they are the native instructions; the unit
// tests build this file a second time on SIMDe's emulation (EPQ_AVX512_EMULATED).
#include "util/avx512.h"  // first: SIMDe, and GCC 12's warnings off

#include "core/attend_kernel.h"

namespace epq {
namespace {

#if defined(__AVX512F__)  // SIMDe 0.7 lacks some of these
// exp_lanes on 16 lanes.
struct Avx512ExpOps {
  using V = __m512;
  using I = __m512i;
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
  static V round(V x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static I to_int(V x) { return _mm512_cvtps_epi32(x); }
  static I half(I k) { return _mm512_srai_epi32(k, 1); }
  static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static V pow2(I k) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23)); }
  static V outside(V x, float lo, float hi, V y) {
    const __mmask16 in_range = _mm512_cmp_ps_mask(x, set1(lo), _CMP_NLT_UQ);
    return _mm512_mask_mov_ps(_mm512_maskz_mov_ps(in_range, y), _mm512_cmp_ps_mask(x, set1(hi), _CMP_GT_OQ), set1(INFINITY));
  }
};
#endif

struct Avx512Lanes {
  using V = simde__m512;
  // Four positions' scores (16 independent sums) or two value vectors per head (16 for 8
  // heads) at once, so that FMAs never wait on the one before. Four positions ran at
  // 59-71 GMAC/s where two ran at 54-68 and eight at 47-58 (Attend/avx512/positions:512).
  static constexpr int kHeads = 2, kDims = 16, kValueVectors = 2, kPositions = 4;
  static V keys(const uint16_t* p) {
#if defined(__AVX512F__)
    return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
    const __m256 k = load_f16(p);
    return join(k, k);
#endif
  }
  static V values(const uint16_t* p) {
#if defined(__AVX512F__)  // SIMDe 0.7 lacks the 512-bit conversion
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#else
    return join(load_f16(p), load_f16(p + 8));
#endif
  }
  static void split(V v, __m256* out) { out[0] = low_half(v), out[1] = high_half(v); }
  // Eight heads: lane_sums's pairs on 512-bit vectors. vshufps pairs and adds lanes 2k and
  // 2k + 1 of two vectors in each 128-bit quarter, as vhaddps does; three such steps leave
  // heads 0, 2, 4, 6 (dimensions 0-3, then 4-7) in the low quarters and 1, 3, 5, 7 in the high
  // ones, and adding the quarters finishes each head as ((0+1)+(2+3))+((4+5)+(6+7)).
  template <int G>
  static __m256 head_sums(const V* v) {
    if constexpr (G == 8) {
      auto pairs = [](V a, V b) { return simde_mm512_add_ps(simde_mm512_shuffle_ps(a, b, 0x88), simde_mm512_shuffle_ps(a, b, 0xDD)); };
      const V quarters = pairs(pairs(v[0], v[1]), pairs(v[2], v[3]));
      const V heads = simde_mm512_add_ps(simde_mm512_shuffle_f32x4(quarters, quarters, 0x88), simde_mm512_shuffle_f32x4(quarters, quarters, 0xDD));
      return _mm256_permutevar8x32_ps(simde_mm512_castps512_ps256(heads), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    } else {
      __m256 per_head[G];
      for (int i = 0; i < G / kHeads; ++i) split(v[i], per_head + i * kHeads);
      return lane_sums<G>(per_head);
    }
  }
  static V repeat(__m256 v) { return join(v, v); }
  static V exp(V v) {
#if defined(__AVX512F__)
    return exp_lanes<Avx512ExpOps>(v);
#else
    return join(exp8(low_half(v)), exp8(high_half(v)));
#endif
  }
  static V loadu(const float* p) { return simde_mm512_loadu_ps(p); }
  static V zero() { return simde_mm512_setzero_ps(); }
  static V set1(float x) { return simde_mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return simde_mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return simde_mm512_mul_ps(a, b); }
  static V sub(V a, V b) { return simde_mm512_sub_ps(a, b); }
  static void storeu(float* p, V v) { simde_mm512_storeu_ps(p, v); }
};

void attend_group(int G, const AttendTask& task) {
  switch (G) {
    case 8: return attend<8, Avx512Lanes>(task);
    case 4: return attend<4, Avx512Lanes>(task);
    default: return attend<2, Avx512Lanes>(task);
  }
}

}  // namespace

#if defined(EPQ_AVX512_EMULATED)
void attend_avx512_emulated(int G, const AttendTask& task) { attend_group(G, task); }
#else
void attend_avx512(int G, const AttendTask& task) { attend_group(G, task); }
#endif

}  // namespace epq
