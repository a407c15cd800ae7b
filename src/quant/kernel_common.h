#pragma once
// Pieces shared by the SIMD kernel files (dot_avx2.cpp, dot_avx512.cpp): loads, prefetch,
// Q4_K/Q5_K and Q2_K/Q3_K scale unpacking, the float-weight kernel and the DotKernel entry that dispatches on the column count.
// Include only from kernel files. Everything here has internal linkage: each kernel file
// is compiled for its own instruction set, and a shared out-of-line copy could carry
// AVX-512 instructions into code that runs on an AVX2-only CPU.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/dot.h"
#include "quant/float_bits.h"
#include "util/avx2.h"

namespace epq::quant {
namespace {

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Weights stream from DRAM; the hardware prefetcher alone does not run far enough ahead.
// Each block asks for the cache lines 4 KiB beyond it (the next rows when past the end).
constexpr int kPrefetchBytes = 4096;
template <typename Block>
inline void prefetch_ahead(const Block* b) {
  prefetch_lines(reinterpret_cast<const char*>(b) + kPrefetchBytes, sizeof(Block));
}

// Where to prefetch for rows read side by side in a group of R (row_bytes apart), at byte
// `at` of each: `distance` bytes further along this row, or past its end, along the row
// that takes its place in the next group (R rows below), which no other row's prefetch
// covers. prefetch_ahead_in_group asks for that line (into L1).
inline const uint8_t* ahead_in_group(const uint8_t* row, size_t at, size_t row_bytes, int R, size_t distance = kPrefetchBytes) {
  const size_t ahead = at + distance;
  return row + ahead + (ahead >= row_bytes ? static_cast<size_t>(R - 1) * row_bytes : 0);
}
inline void prefetch_ahead_in_group(const uint8_t* row, size_t at, size_t row_bytes, int R, size_t distance = kPrefetchBytes) {
  _mm_prefetch(reinterpret_cast<const char*>(ahead_in_group(row, at, row_bytes, R, distance)), _MM_HINT_T0);
}

// Column c of the activations: act + c * stride bytes.
template <typename Act>
inline const Act* act_col(const void* act, size_t stride, int c) {
  return reinterpret_cast<const Act*>(static_cast<const uint8_t*>(act) + static_cast<size_t>(c) * stride);
}

// Q4_K/Q5_K scales of two blocks (p, q): each block's 12 packed bytes to 16 bytes, eight
// 6-bit scales then eight 6-bit mins (see unpack_scale_min_k4), block p in the low
// 128-bit half and q in the high half. Computed on 32-bit lanes [u0 u1 u2] of each block:
//   scales 0-3: u0 & 0x3f..   scales 4-7: (u2 & 0x0f..) | ((u0 >> 6) & 0x03..) << 4
//   mins 0-3:   u1 & 0x3f..   mins 4-7:   ((u2 >> 4) & 0x0f..) | ((u1 >> 6) & 0x03..) << 4
// (16-byte loads: the 4 bytes past the 12 are ignored.)
inline __m256i k4_scales_and_mins_x2(const uint8_t* p, const uint8_t* q) {
  const __m256i raw = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(q), reinterpret_cast<const __m128i*>(p));
  const __m256i u0u0u1u1 = _mm256_shuffle_epi32(raw, _MM_SHUFFLE(1, 1, 0, 0));
  const __m256i u2 = _mm256_shuffle_epi32(raw, _MM_SHUFFLE(2, 2, 2, 2));
  const __m256i low6 = _mm256_and_si256(u0u0u1u1, _mm256_set1_epi32(0x3f3f3f3f));
  const __m256i high_bits = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0u0u1u1, 6), _mm256_set1_epi32(0x03030303)), 4);
  const __m256i low4 = _mm256_and_si256(_mm256_srlv_epi32(u2, _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4)), _mm256_set1_epi32(0x0f0f0f0f));
  return _mm256_blend_epi32(low6, _mm256_or_si256(low4, high_bits), 0b10101010);
}

// Shuffle masks for k4_scales_and_mins_x2's bytes, the same in every 128-bit lane: mins
// 4h..4h+3 of the lane's block, each in two 16-bit lanes. Against bsums 8h..8h+7, vpmaddwd
// gives min[j] * (bsums[2j] + bsums[2j + 1]).
alignas(32) constexpr uint8_t kRowPairMins[2][32] = {
#define EPQ_MINS(m) {m, 0x80, m, 0x80, m + 1, 0x80, m + 1, 0x80, m + 2, 0x80, m + 2, 0x80, m + 3, 0x80, m + 3, 0x80, \
                     m, 0x80, m, 0x80, m + 1, 0x80, m + 1, 0x80, m + 2, 0x80, m + 2, 0x80, m + 3, 0x80, m + 3, 0x80}
    EPQ_MINS(8), EPQ_MINS(12)
#undef EPQ_MINS
};

// Q3_K scales: the 12 packed bytes to 16 signed bytes (see unpack_q3_k_scales), on
// 32-bit lanes [u0 u1 u2] of the packed bytes; lane k holds scales 4k..4k+3:
//   low nibbles: u0 & 0x0f.., u1 & 0x0f.., (u0 >> 4) & 0x0f.., (u1 >> 4) & 0x0f..
//   high bits:   ((u2 >> 2k) & 0x03..) << 4;  minus 32.
inline __m128i q3_k_scales(const uint8_t* packed) {
  uint32_t u2;
  std::memcpy(&u2, packed + 8, 4);  // the block ends 2 bytes after the scales: no 16-byte load
  const __m128i u0u1 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed));
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(u0u1, _MM_SHUFFLE(1, 0, 1, 0)), _mm_setr_epi32(0, 0, 4, 4)),
                                    _mm_set1_epi8(0x0F));
  const __m128i high = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(u2)), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi32(high, 4)), _mm_set1_epi8(32));
}

// Q2_K and Q3_K sub-block scales (16 signed bytes) and the factors of their offsets:
// Q3_K codes are stored +4, so its offset is 4 * sum(scale * bsum); Q2_K's is dmin * sum(min * bsum).
struct Q23KScales {
  __m128i scales, offsets;
};
inline Q23KScales q23_k_scales(const BlockQ3_K& x) {
  const __m128i s = q3_k_scales(x.scales);
  return {s, s};
}
inline Q23KScales q23_k_scales(const BlockQ2_K& x) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales));
  return {_mm_and_si128(packed, _mm_set1_epi8(0x0F)), _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F))};
}

// Rows [0, n_rows) in groups of R, then the rest one by one: fn.template operator()<G>(r)
// for the group of G rows that starts at row r.
template <int R, typename Fn>
inline void row_groups(int64_t n_rows, Fn&& fn) {
  int64_t r = 0;
  for (; r + R <= n_rows; r += R) fn.template operator()<R>(r);
  for (; r < n_rows; ++r) fn.template operator()<1>(r);
}

// Float weights: 8 of them as floats at element i (load8), one (load1), bytes per weight.
// BF16 has no load8: DotFloat reads it in pairs.
struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m256 load8(const void* w, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(w) + i); }
  static float load1(const void* w, int64_t i) { return static_cast<const float*>(w)[i]; }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m256 load8(const void* w, int64_t i) { return load_f16(static_cast<const uint16_t*>(w) + i); }
  static float load1(const void* w, int64_t i) { return f16_to_f32(static_cast<const uint16_t*>(w)[i]); }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static constexpr bool kPairs = true;  // DotFloat reads 32 at a time, as pairs in 32-bit lanes (V::load_bf16_pairs)
  static float load1(const void* w, int64_t i) { return bf16_to_f32(static_cast<const uint16_t*>(w)[i]); }
};

// F32, F16 and BF16 weights (loaded by L) against F32 activations, 16 floats at a time in
// V's vectors: 32-bit lane j of a row's sum takes elements 16k + j in turn (one FMA each),
// then the lanes are added as hsum(lanes 0-7 + lanes 8-15), then the n % 16 last products
// one by one. BF16 goes 32 elements a step: lane j takes elements 32k + 2j and then
// 32k + 2j + 1, and the n % 32 last go one by one. A 32-bit lane of BF16 weights holds
// such a pair: shifted left 16 it is the even element as a float, masked to its high half
// the odd one, two instructions for 32 weights where widening took four; the activations
// come with each block's even elements first (ActFormat::kBF16), and the AVX-512 kernel
// runs 1.06-1.13x faster with four or eight columns (docs/PERFORMANCE.md, stop 64). That
// order is the kernels' contract, so the AVX2 set (two 256-bit halves) and the AVX-512 set
// (one 512-bit vector) give the same bits. With few columns, rows go in groups (up to
// eight for one column, as V's registers allow) so that their FMA chains overlap, each
// activation vector is loaded once for the group, and from DRAM more rows stream at once;
// a row's sums do not depend on its partners. On a Zen 4, eight rows against four took
// BF16 and F16 decode from 0.52-0.55 of a fast read probe to 0.60-0.62, but one column
// with rows in L3 from 21-27 to 16-20 GMAC/s (docs/PERFORMANCE.md, stop 51).
template <typename L, typename V>
struct DotFloat {
  static constexpr int64_t kLineElems = 64 / L::kBytes;  // weights per cache line, prefetched together
  static constexpr int kMaxCols = 4;  // more columns go in calls of four (see entry): with eight, a group was one row
  static constexpr bool kPairs = requires { L::kPairs; };
  static constexpr int64_t kStep = kPairs ? 32 : 16;  // elements a step takes
  // Decode (one column) streams the rows from DRAM and needs the prefetch far ahead. With
  // several columns every row reads the activations from L1 again; there the next group's
  // lines, asked for 4 KiB ahead, pushed them out (BF16 and F16 with four or eight columns
  // 1.1-1.2x at 512 bytes, F32 1.03-1.07x; docs/PERFORMANCE.md, stop 64).
  template <int C>
  static constexpr size_t kPrefetchDistance = C == 1 ? kPrefetchBytes : 512;

  template <int R, int C>
  static void rows(int64_t n, const uint8_t* w, size_t row_bytes, const void* act, size_t stride, float* out, size_t out_stride) {
    const float* a[C];
    const uint8_t* x[R];
    typename V::T acc[R][C];
    for (int c = 0; c < C; ++c) a[c] = act_col<float>(act, stride, c);
    for (int r = 0; r < R; ++r) {
      x[r] = w + static_cast<size_t>(r) * row_bytes;
      for (int c = 0; c < C; ++c) acc[r][c] = V::zero();
    }
    auto step = [&](int64_t i) {
      if constexpr (kPairs) {
        typename V::T even[C], odd[C];
        for (int c = 0; c < C; ++c) {
          even[c] = V::load(a[c] + i);
          odd[c] = V::load(a[c] + i + 16);
        }
        for (int r = 0; r < R; ++r) {
          const auto [we, wo] = V::load_bf16_pairs(x[r], i);
          for (int c = 0; c < C; ++c) acc[r][c] = V::fmadd(wo, odd[c], V::fmadd(we, even[c], acc[r][c]));
        }
      } else {
        typename V::T av[C];
        for (int c = 0; c < C; ++c) av[c] = V::load(a[c] + i);
        for (int r = 0; r < R; ++r) {
          const typename V::T wv = V::template load_weights<L>(x[r], i);
          for (int c = 0; c < C; ++c) acc[r][c] = V::fmadd(wv, av[c], acc[r][c]);
        }
      }
    };
    int64_t i = 0;
    for (; i + kLineElems <= n; i += kLineElems) {
      for (int r = 0; r < R; ++r) prefetch_ahead_in_group(x[r], static_cast<size_t>(i * L::kBytes), row_bytes, R, kPrefetchDistance<C>);
      for (int64_t k = 0; k < kLineElems; k += kStep) step(i + k);
    }
    for (; i + kStep <= n; i += kStep) step(i);
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) {
        float s = V::sum(acc[r][c]);
        for (int64_t k = i; k < n; ++k) s += L::load1(x[r], k) * a[c][k];
        out[static_cast<size_t>(c) * out_stride + static_cast<size_t>(r)] = s;
      }
    }
  }

  template <int C>
  static void matmul(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
                     size_t out_stride) {
    row_groups<std::clamp(V::kAccumulators / C, 1, C == 1 ? 8 : 4)>(n_rows, [&]<int G>(int64_t r) {
      rows<G, C>(n, w + static_cast<size_t>(r) * row_bytes, row_bytes, act, stride, out + r, out_stride);
    });
  }
};

// K::run<C> on each row of the run in turn, with `extra` (what K prepared for the whole
// run) passed between the activations and the row's results.
template <typename K, int C, typename... Extra>
void each_row(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
              size_t out_stride, Extra... extra) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float row_out[C];
    K::template run<C>(n, w + static_cast<size_t>(r) * row_bytes, act, stride, extra..., row_out);
    for (int c = 0; c < C; ++c) out[static_cast<size_t>(c) * out_stride + static_cast<size_t>(r)] = row_out[c];
  }
}

// C columns for format K: K::matmul<C> over the whole run of rows where K has one, else
// K::run<C> row by row; where K sets kMaxCols, more columns go in calls of that many.
template <typename K>
constexpr int max_columns() {
  if constexpr (requires { K::kMaxCols; }) {
    return K::kMaxCols;
  } else {
    return kMaxCols;
  }
}
template <typename K, int C>
void columns(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
             size_t out_stride) {
  if constexpr (C > max_columns<K>()) {
    constexpr int M = max_columns<K>();
    columns<K, M>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
    columns<K, C - M>(n, w, row_bytes, n_rows, static_cast<const uint8_t*>(act) + M * stride, stride, out + M * out_stride, out_stride);
  } else if constexpr (requires { K::template matmul<C>; }) {
    K::template matmul<C>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
  } else {
    each_row<K, C>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
  }
}

// The DotKernel for format K.
template <typename K>
void entry(int64_t n, const void* w_rows, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, int n_cols, float* out,
           size_t out_stride) {
  const auto* w = static_cast<const uint8_t*>(w_rows);
  switch (n_cols) {
    case 1: return columns<K, 1>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
    case 2: return columns<K, 2>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
    case 3: return columns<K, 3>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
    case 4: return columns<K, 4>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
    case 5: return columns<K, 5>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
    case 6: return columns<K, 6>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
    case 7: return columns<K, 7>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
    default: return columns<K, 8>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
  }
}

}  // namespace
}  // namespace epq::quant
