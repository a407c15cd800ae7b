#pragma once
// The attention kernel (core/attend_task.h), written once over a lane policy L:
//   L::V               the vector type
//   L::kHeads          query heads per vector in the score pass (a head's 8 lanes each)
//   L::kDims           value dimensions per vector in the value pass
//   L::kValueVectors   vectors per head in one value pass
//   L::kPositions      positions whose scores are computed together
//   L::keys(p)         8 F16 key dimensions as floats, once for each of kHeads heads
//   L::values(p)       kDims F16 value dimensions as floats
//   L::split(v, out)   v's kHeads heads as 8-lane vectors, out[0] the first
//   L::head_sums<G>(v) lane i the sum of head i's 8 lanes in v[0..G/kHeads), as lane_sums
//                      adds them
//   L::repeat(v)       the 8 lanes of v in each of kHeads places
//   L::exp(v)          exp_lanes (util/exp_lanes.h) in every lane
// and loadu, zero, set1, fmadd, mul, sub, storeu. Whatever the policy, head i's score sums in
// 8 lanes, lane l over dimensions l, l + 8, ... in turn, and each value dimension over the
// positions in turn: AVX2 (one head per 256-bit vector) and AVX-512 (two per 512-bit
// vector) do the same float operations and give the same bits.
//
// Include only from the attention kernel files: everything here has internal linkage
// (see quant/kernel_common.h for why).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/attend_task.h"
#include "util/avx2.h"

namespace epq {
namespace {

// A long context's cache rows come from DRAM, one KV head's row (256 bytes) every
// kv_stride: without prefetches the loops below wait on each row in turn. Rows this far
// ahead (at most the last) are asked for.
constexpr int64_t kKeyPrefetchRows = 8;     // a row's scores take ~100 cycles
constexpr int64_t kValuePrefetchRows = 32;  // a row's 8 dimensions take a few cycles
constexpr int kHalvesPerLine = 32;

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

// The first G lanes of v to p. A masked store is microcoded on AMD's cores (Zen 4: about
// a tenth of the attention's time went to it), so eight heads take a plain store.
template <int G>
void store_heads(float* p, __m256 v) {
  if constexpr (G == 8) {
    _mm256_storeu_ps(p, v);
  } else {
    _mm256_maskstore_ps(p, first_lanes<G>(), v);
  }
}

// The scores of kRows positions, whose key rows are at k[r], for G heads: into
// scores[r * G ...], and their maximum into max. The queries are packed as the loop reads
// them: for each 8 dimensions, the vectors of kHeads heads in turn. Each position's sums are
// the same whatever kRows: more rows only give the core more independent sums to work on.
template <int G, typename L, int kRows>
void score_rows(const AttendTask& t, const uint16_t* const (&k)[kRows], float* scores, __m256& max) {
  using V = typename L::V;
  constexpr int kVectors = G / L::kHeads;
  V acc[kRows][kVectors];
  for (auto& position : acc) {
    for (V& a : position) a = L::zero();
  }
  for (int d = 0; d < t.D; d += 8) {
    V kv[kRows];
    for (int r = 0; r < kRows; ++r) kv[r] = L::keys(k[r] + d);
    for (int i = 0; i < kVectors; ++i) {
      const V q = L::loadu(t.packed_q + d * G + i * 8 * L::kHeads);
      for (int r = 0; r < kRows; ++r) acc[r][i] = L::fmadd(q, kv[r], acc[r][i]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    const __m256 s = _mm256_mul_ps(L::template head_sums<G>(acc[r]), _mm256_set1_ps(t.scale));
    store_heads<G>(scores + r * G, s);
    max = _mm256_max_ps(max, s);
  }
}

// Dimensions [d, d + kVectors x kDims) of the G heads' outputs: the values of every visible
// position (row(j) its cache row) weighted by its G scores, in turn, then times inv.
template <int G, typename L, int kVectors, typename Row>
void weigh_values(const AttendTask& t, int d, const Row& row, const float (&inv)[G]) {
  using V = typename L::V;
  V acc[G][kVectors];
  for (auto& head : acc) {
    for (V& a : head) a = L::zero();
  }
  for (int64_t j = 0; j < t.n_pos; ++j) {
    if (d % kHalvesPerLine == 0) {
      prefetch_lines(t.v + row(std::min(j + kValuePrefetchRows, t.n_pos - 1)) * t.v_stride + d, 1);  // dimensions d..d+31
    }
    const uint16_t* vj = t.v + row(j) * t.v_stride + d;
    V vv[kVectors];
    for (int w = 0; w < kVectors; ++w) vv[w] = L::values(vj + w * L::kDims);
    for (int i = 0; i < G; ++i) {
      const V weight = L::set1(t.scores[j * G + i]);
      for (int w = 0; w < kVectors; ++w) acc[i][w] = L::fmadd(weight, vv[w], acc[i][w]);
    }
  }
  for (int i = 0; i < G; ++i) {
    for (int w = 0; w < kVectors; ++w) L::storeu(t.out + i * t.Dv + d + w * L::kDims, L::mul(acc[i][w], L::set1(inv[i])));
  }
}

// Every K and V row is read once for all G heads, and the accumulators stay in registers.
// Visible position j's G scores go to scores[j * G ...]; head i's arithmetic happens in
// lane i and is the same whatever G or wherever the rows sit in the ring.
template <int G, typename L>
void attend(const AttendTask& t) {
  static_assert(G % L::kHeads == 0, "whole vectors of heads");
  const int64_t n_pos = t.n_pos;
  auto row = [&](int64_t j) {
    const int64_t r = t.first + j;
    return static_cast<size_t>(r < t.rows ? r : r - t.rows);
  };
  for (int d = 0; d < t.D; d += 8) {
    for (int i = 0; i < G; ++i) std::copy_n(t.q + i * t.D + d, 8, t.packed_q + d * G + i * 8);
  }
  const __m256i heads = first_lanes<G>();
  __m256 max = _mm256_set1_ps(-INFINITY);
  auto prefetch_key = [&](int64_t j) {
    prefetch_lines(t.k + row(std::min(j + kKeyPrefetchRows, n_pos - 1)) * t.k_stride, static_cast<size_t>(t.D) * sizeof(uint16_t));
  };
  int64_t scored = 0;
  for (; scored + L::kPositions <= n_pos; scored += L::kPositions) {
    const uint16_t* k[L::kPositions];
    for (int r = 0; r < L::kPositions; ++r) k[r] = t.k + row(scored + r) * t.k_stride, prefetch_key(scored + r);
    score_rows<G, L, L::kPositions>(t, k, t.scores + scored * G, max);
  }
  for (; scored < n_pos; ++scored) {
    const uint16_t* k[1] = {t.k + row(scored) * t.k_stride};
    prefetch_key(scored);
    score_rows<G, L, 1>(t, k, t.scores + scored * G, max);
  }
  // e^(score - max) in place, and its sum over positions in double, in position order.
  __m256d sum_low = _mm256_setzero_pd(), sum_high = _mm256_setzero_pd();
  auto add_to_sums = [&](__m256 e) {
    sum_low = _mm256_add_pd(sum_low, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    sum_high = _mm256_add_pd(sum_high, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  };
  int64_t j = 0;
  if constexpr (G == 8) {  // scores packed without gaps: kHeads positions per vector
    const typename L::V max_repeated = L::repeat(max);
    for (; j + L::kHeads <= n_pos; j += L::kHeads) {
      const typename L::V e = L::exp(L::sub(L::loadu(t.scores + j * G), max_repeated));
      L::storeu(t.scores + j * G, e);
      __m256 positions[L::kHeads];
      L::split(e, positions);
      for (const __m256 p : positions) add_to_sums(p);
    }
  }
  for (; j < n_pos; ++j) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(t.scores + j * G, heads), max));
    store_heads<G>(t.scores + j * G, e);
    add_to_sums(e);
  }
  alignas(32) double sums[8];
  _mm256_store_pd(sums, sum_low);
  _mm256_store_pd(sums + 4, sum_high);
  float inv[G];
  for (int i = 0; i < G; ++i) inv[i] = static_cast<float>(1.0 / sums[i]);
  // The weighted sum of V, kValueVectors x kDims dimensions at a time (the rest kDims at a
  // time), then / the sum.
  int d = 0;
  for (; d + L::kValueVectors * L::kDims <= t.Dv; d += L::kValueVectors * L::kDims) weigh_values<G, L, L::kValueVectors>(t, d, row, inv);
  for (; d < t.Dv; d += L::kDims) weigh_values<G, L, 1>(t, d, row, inv);
}

}  // namespace
}  // namespace epq
