#pragma once
// Small helpers for the AVX-512 kernel files, written with SIMDe's names so that the unit
// tests can build those files on SIMDe's emulation too (EPQ_AVX512_EMULATED, see
// tests/CMakeLists.txt). Include only from *_avx512.cpp files: everything here has
// internal linkage, so that no out-of-line copy compiled for AVX-512 can be the one that
// code on an AVX2-only CPU calls.
#include <simde/x86/avx512.h>

// GCC 12's AVX-512 headers start some casts and extracts from _mm256_undefined_*(), which
// its -W(maybe-)uninitialized reports once inlined at -O3 (GCC bug 105593, fixed in GCC 13):
// off for the rest of the including file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace epq {
namespace {

// Two 256-bit halves as one vector (for what SIMDe 0.7, Debian 12, lacks).
inline simde__m512 join(__m256 low, __m256 high) {
  return simde_mm512_castpd_ps(simde_mm512_insertf64x4(simde_mm512_castpd256_pd512(_mm256_castps_pd(low)), _mm256_castps_pd(high), 1));
}
inline __m256 low_half(simde__m512 v) { return simde_mm512_castps512_ps256(v); }
inline __m256 high_half(simde__m512 v) { return _mm256_castpd_ps(simde_mm512_extractf64x4_pd(simde_mm512_castps_pd(v), 1)); }

}  // namespace
}  // namespace epq
