// The attention kernel (core/attend_kernel.h) on 512-bit vectors: two query heads per
// vector in the score pass, 16 value dimensions per vector in the value pass. Half the
// multiply-adds of the AVX2 build, and the same bits. Written with SIMDe's names, like
// quant/dot_avx512.cpp: with AVX-512 flags they are the native instructions; the unit
// tests build this file a second time on SIMDe's emulation (EPQ_AVX512_EMULATED).
#include "util/avx512.h"  // first: SIMDe, and GCC 12's warnings off

#include "core/attend_kernel.h"

namespace epq {
namespace {

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
  static V loadu(const float* p) { return simde_mm512_loadu_ps(p); }
  static V zero() { return simde_mm512_setzero_ps(); }
  static V set1(float x) { return simde_mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return simde_mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return simde_mm512_mul_ps(a, b); }
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
