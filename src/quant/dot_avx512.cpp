// AVX-512 dot kernels (F, BW, VL, DQ and VNNI) for the formats that carry MoE weights:
// Q4_K, Q5_K, Q6_K, Q8_0 and the float formats (F32, F16, BF16). The set takes the AVX2
// kernels for every other type.
//
// The K formats work on 64 elements per register: codes (unsigned) times activations
// with vpmaddubsw, then vpdpwssd multiplies those pair sums by the sub-block scales and
// accumulates, in one instruction where AVX2 needs two. Q8_0 uses vpdpbusd on 32 bytes.
//
// Written with SIMDe's names (simde_mm512_*), which are the native intrinsics when this
// file is compiled for AVX-512 (CMakeLists.txt gives it the flags). The unit tests compile
// it a second time with EPQ_AVX512_EMULATED and without those flags, where SIMDe carries
// out each instruction with AVX2, so that a CPU without AVX-512 checks these kernels
// against the scalar reference too.
#include <simde/x86/avx512.h>

// GCC 12's AVX-512 headers start some casts and extracts from _mm256_undefined_*(), which
// its -W(maybe-)uninitialized reports once inlined at -O3 (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstring>
#include <type_traits>

#include "quant/activation.h"
#include "quant/blocks.h"
#include "quant/dot.h"
#include "quant/float_bits.h"
#include "quant/kernel_common.h"
#include "util/avx2.h"

namespace epq::quant {
namespace {

using V512i = simde__m512i;
using V512 = simde__m512;

inline V512i load512(const void* p) { return simde_mm512_loadu_si512(p); }
// The same 32 bytes in both 256-bit halves.
inline V512i broadcast256(const void* p) { return simde_mm512_broadcast_i64x4(load256(p)); }
// A vector of 16-bit lanes: `low` in lanes 0-15 and `high` in lanes 16-31.
inline V512i halves16(int16_t low, int16_t high) {
  return simde_mm512_inserti64x4(simde_mm512_castsi256_si512(_mm256_set1_epi16(low)), _mm256_set1_epi16(high), 1);
}
// Two 256-bit halves as one vector (for what SIMDe 0.7, Debian 12, lacks).
inline V512 join(__m256 low, __m256 high) {
  return simde_mm512_castpd_ps(simde_mm512_insertf64x4(simde_mm512_castpd256_pd512(_mm256_castps_pd(low)), _mm256_castps_pd(high), 1));
}
// int32 lanes to floats. SIMDe 0.7 lacks this one: two AVX2 halves there.
inline V512 to_float(V512i v) {
#if defined(__AVX512F__)
  return _mm512_cvtepi32_ps(v);
#else
  return join(_mm256_cvtepi32_ps(simde_mm512_castsi512_si256(v)), _mm256_cvtepi32_ps(simde_mm512_extracti64x4_epi64(v, 1)));
#endif
}
inline float hsum512(V512 v) {
  const V512i bits = simde_mm512_castps_si512(v);
  return hsum(_mm256_add_ps(_mm256_castsi256_ps(simde_mm512_castsi512_si256(bits)),
                            _mm256_castsi256_ps(simde_mm512_extracti64x4_epi64(bits, 1))));
}
// A 256-bit vector in the low half, zeros above.
inline V512i widen(__m256i v) { return simde_mm512_inserti64x4(simde_mm512_setzero_si512(), v, 0); }

// Index vectors for vpermw: 16-bit lane i selects scale first + i / lanes_per_scale.
// Q4_K/Q5_K chunk j (sub-blocks of 32): scale_index(2j, 16); Q6_K chunk k (sub-blocks
// of 16): scale_index(4k, 8).
inline V512i scale_index(int first, int lanes_per_scale) {
  alignas(64) int16_t index[32];
  for (int i = 0; i < 32; ++i) index[i] = static_cast<int16_t>(first + i / lanes_per_scale);
  return load512(index);
}

// One block's scales then mins as 16 int16 lanes.
inline __m256i k4_scales_and_mins(const uint8_t* packed) {
  return _mm256_cvtepu8_epi16(_mm256_castsi256_si128(k4_scales_and_mins_x2(packed, packed)));
}

// The eight mins (16-bit lanes) each in the two 16-bit lanes 2j, 2j+1, for k4_min_sums.
inline __m256i k4_paired_mins(__m128i mins8x16) {
  const __m256i mins = _mm256_cvtepu16_epi32(mins8x16);
  return _mm256_or_si256(mins, _mm256_slli_epi32(mins, 16));
}
// 8 int32 lanes to be added: sum over sub-blocks j of min[j] * (bsums[2j] + bsums[2j+1]).
inline __m256i k4_min_sums(__m256i mins_paired, const BlockQ8_K& a) { return _mm256_madd_epi16(mins_paired, load256(a.bsums)); }

template <bool kFive>
struct DotQ45K {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;

  // Per column: acc += a.d * d * (sum over chunks of scale . codes . a), and
  // acc_min += a.d * dmin * (min . bsums); the result is acc - acc_min.
  template <int C>
  static void run(int64_t n, const void* w, const void* act, size_t stride, float* out) {
    const auto* wb = static_cast<const Block*>(w);
    const BlockQ8_K* a[C];
    V512 acc[C];
    __m256 acc_min[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c), acc[c] = simde_mm512_setzero_ps(), acc_min[c] = _mm256_setzero_ps();
    V512i index[4];
    for (int j = 0; j < 4; ++j) index[j] = scale_index(2 * j, 16);
    const V512i nibble_shift = halves16(0, 4);  // low nibbles in the low half, high in the high
    const V512i m4 = simde_mm512_set1_epi8(0x0F), one = simde_mm512_set1_epi8(1);
    for (int64_t b = 0; b < n / 256; ++b) {
      prefetch_ahead(wb + b);
      const Block& x = wb[b];
      const __m256i scales_mins = k4_scales_and_mins(x.scales);
      const V512i scales = simde_mm512_castsi256_si512(scales_mins);  // lanes 0-7; vpermw reads no others
      V512i sum[C];
      for (int c = 0; c < C; ++c) sum[c] = simde_mm512_setzero_si512();
      V512i qh = simde_mm512_setzero_si512();  // Q5_K's fifth bits
      if constexpr (kFive) qh = broadcast256(x.qh);
      for (int j = 0; j < 4; ++j) {
        // Chunk j is elements 64j..64j+63: the low nibbles of qs[32j..] then their high nibbles.
        V512i q = simde_mm512_and_si512(simde_mm512_srlv_epi16(broadcast256(x.qs + 32 * j), nibble_shift), m4);
        if constexpr (kFive) {  // bit 2j of qh[l] for the first 32, bit 2j + 1 for the next
          const V512i shift = halves16(static_cast<int16_t>(2 * j), static_cast<int16_t>(2 * j + 1));
          const V512i high = simde_mm512_and_si512(simde_mm512_srlv_epi16(qh, shift), one);
          q = simde_mm512_or_si512(q, simde_mm512_slli_epi16(high, 4));
        }
        const V512i s = simde_mm512_permutexvar_epi16(index[j], scales);
        for (int c = 0; c < C; ++c) {
          sum[c] = simde_mm512_dpwssd_epi32(sum[c], simde_mm512_maddubs_epi16(q, load512(a[c][b].qs + 64 * j)), s);
        }
      }
      const float d = f16_to_f32(x.d), dmin = f16_to_f32(x.dmin);
      const __m256i mins = k4_paired_mins(_mm256_extracti128_si256(scales_mins, 1));
      for (int c = 0; c < C; ++c) {
        acc[c] = simde_mm512_fmadd_ps(to_float(sum[c]), simde_mm512_set1_ps(d * a[c][b].d), acc[c]);
        acc_min[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(k4_min_sums(mins, a[c][b])), _mm256_set1_ps(dmin * a[c][b].d), acc_min[c]);
      }
    }
    for (int c = 0; c < C; ++c) out[c] = hsum512(acc[c]) - hsum(acc_min[c]);
  }
};

struct DotQ6K {
  template <int C>
  static void run(int64_t n, const void* w, const void* act, size_t stride, float* out) {
    const auto* wb = static_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* a[C];
    V512 acc[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c), acc[c] = simde_mm512_setzero_ps();
    V512i index[4];
    for (int k = 0; k < 4; ++k) index[k] = scale_index(4 * k, 8);
    const V512i m4 = simde_mm512_set1_epi8(0x0F), m2 = simde_mm512_set1_epi8(3);
    for (int64_t b = 0; b < n / 256; ++b) {
      prefetch_ahead(wb + b);
      const BlockQ6_K& x = wb[b];
      const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales)));
      const V512i scales = simde_mm512_castsi256_si512(scales16);  // lanes 0-15; vpermw reads no others
      V512i sum[C];
      for (int c = 0; c < C; ++c) {
        // Codes are stored +32: start from -32 * sum(scale * bsum).
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(scales16, load256(a[c][b].bsums)), 5);
        sum[c] = widen(_mm256_sub_epi32(_mm256_setzero_si256(), offset));
      }
      for (int h = 0; h < 2; ++h) {
        const V512i ql = load512(x.ql + 64 * h);
        const V512i qh = broadcast256(x.qh + 32 * h);
        for (int p = 0; p < 2; ++p) {
          // Elements h*128 + 64p + [0, 64): nibble p of ql[64h..64h+63], and bits 4p..4p+1
          // of qh[32h + l] for the first 32 and 4p+2..4p+3 for the next (the Q6_K layout).
          const V512i low = simde_mm512_and_si512(p == 0 ? ql : simde_mm512_srli_epi16(ql, 4), m4);
          const V512i shift = halves16(static_cast<int16_t>(4 * p), static_cast<int16_t>(4 * p + 2));
          const V512i high = simde_mm512_and_si512(simde_mm512_srlv_epi16(qh, shift), m2);
          const V512i q = simde_mm512_or_si512(low, simde_mm512_slli_epi16(high, 4));
          const V512i s = simde_mm512_permutexvar_epi16(index[2 * h + p], scales);
          for (int c = 0; c < C; ++c) {
            sum[c] = simde_mm512_dpwssd_epi32(sum[c], simde_mm512_maddubs_epi16(q, load512(a[c][b].qs + 128 * h + 64 * p)), s);
          }
        }
      }
      const float d = f16_to_f32(x.d);
      for (int c = 0; c < C; ++c) acc[c] = simde_mm512_fmadd_ps(to_float(sum[c]), simde_mm512_set1_ps(d * a[c][b].d), acc[c]);
    }
    for (int c = 0; c < C; ++c) out[c] = hsum512(acc[c]);
  }
};

// Q8_0: |w| times a with w's sign, summed in fours by vpdpbusd (the 256-bit form).
struct DotQ8_0 {
  template <int C>
  static void run(int64_t n, const void* w, const void* act, size_t stride, float* out) {
    const auto* wb = static_cast<const BlockQ8_0*>(w);
    const BlockQ8x32* a[C];
    __m256 acc[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8x32>(act, stride, c), acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 32; ++b) {
      prefetch_ahead(wb + b);
      const __m256i q = load256(wb[b].qs);
      const __m256i q_abs = _mm256_sign_epi8(q, q);
      const float d = f16_to_f32(wb[b].d);
      for (int c = 0; c < C; ++c) {
        const __m256i p = simde_mm256_dpbusd_epi32(_mm256_setzero_si256(), q_abs, _mm256_sign_epi8(load256(a[c][b].qs), q));
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * a[c][b].d), acc[c]);
      }
    }
    for (int c = 0; c < C; ++c) out[c] = hsum(acc[c]);
  }
};

// F32, F16 and BF16 weights (DotFloat, kernel_common.h): 16 floats in one vector, lanes
// 0-7 and 8-15 summed as the AVX2 kernels' two halves are, so the bits are the same.
struct Floats16 {
  using T = V512;
  static constexpr int kAccumulators = 8;
  static T zero() { return simde_mm512_setzero_ps(); }
  static T load(const float* p) { return simde_mm512_loadu_ps(p); }
  template <typename L>
  static T load_weights(const void* w, int64_t i) {
#if defined(__AVX512F__)  // SIMDe 0.7 lacks the 512-bit conversions
    if constexpr (std::is_same_v<L, LoadF32>) {
      return _mm512_loadu_ps(static_cast<const float*>(w) + i);
    } else if constexpr (std::is_same_v<L, LoadF16>) {
      return _mm512_cvtph_ps(load256(static_cast<const uint16_t*>(w) + i));
    } else {
      static_assert(std::is_same_v<L, LoadBF16>);
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(load256(static_cast<const uint16_t*>(w) + i)), 16));
    }
#else
    return join(L::load8(w, i), L::load8(w, i + 8));
#endif
  }
  static T fmadd(T w, T a, T acc) { return simde_mm512_fmadd_ps(w, a, acc); }
  static float sum(T acc) { return hsum512(acc); }
};

KernelSet make_avx512(const char* name) {
  KernelSet s = *avx2_kernels();
  s.name = name;
  auto set = [&](Type t, DotKernel k) { s.dot[static_cast<uint32_t>(t)] = k; };
  set(Type::Q4_K, entry<DotQ45K<false>>);
  set(Type::Q5_K, entry<DotQ45K<true>>);
  set(Type::Q6_K, entry<DotQ6K>);
  set(Type::Q8_0, entry<DotQ8_0>);
  set(Type::F32, entry<DotFloat<LoadF32, Floats16>>);
  set(Type::F16, entry<DotFloat<LoadF16, Floats16>>);
  set(Type::BF16, entry<DotFloat<LoadBF16, Floats16>>);
  return s;
}

}  // namespace

#if defined(EPQ_AVX512_EMULATED)
const KernelSet& avx512_kernels_emulated() {
  static const KernelSet s = make_avx512("avx512-emulated");
  return s;
}
#else
const KernelSet& avx512_kernels_unchecked() {
  static const KernelSet s = make_avx512("avx512");
  return s;
}
#endif

}  // namespace epq::quant
