#pragma once
// Pieces shared by the SIMD kernel files (dot_avx2.cpp, dot_avx512.cpp): loads, prefetch,
// Q4_K/Q5_K scale unpacking and the DotKernel entry that dispatches on the column count.
// Include only from kernel files. Everything here has internal linkage: each kernel file
// is compiled for its own instruction set, and a shared out-of-line copy could carry
// AVX-512 instructions into code that runs on an AVX2-only CPU.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"
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

// K::run<C> on each row of the run in turn.
template <typename K, int C>
void each_row(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
              size_t out_stride) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float row_out[C];
    K::template run<C>(n, w + static_cast<size_t>(r) * row_bytes, act, stride, row_out);
    for (int c = 0; c < C; ++c) out[static_cast<size_t>(c) * out_stride + static_cast<size_t>(r)] = row_out[c];
  }
}

// The DotKernel for format K: K::matmul<C> over the whole run of rows where K has one,
// else K::run<C> row by row.
template <typename K>
void entry(int64_t n, const void* w_rows, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, int n_cols, float* out,
           size_t out_stride) {
  const auto* w = static_cast<const uint8_t*>(w_rows);
  auto columns = [&]<int C>() {
    if constexpr (requires { K::template matmul<C>; }) {
      K::template matmul<C>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
    } else {
      each_row<K, C>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
    }
  };
  switch (n_cols) {
    case 1: return columns.template operator()<1>();
    case 2: return columns.template operator()<2>();
    case 3: return columns.template operator()<3>();
    case 4: return columns.template operator()<4>();
    case 5: return columns.template operator()<5>();
    case 6: return columns.template operator()<6>();
    case 7: return columns.template operator()<7>();
    default: return columns.template operator()<8>();
  }
}

}  // namespace
}  // namespace epq::quant
