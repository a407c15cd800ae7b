// AVX2 dot kernels (with FMA and F16C). Integer formats multiply int8 codes with
// _mm256_maddubs_epi16 and scale per block; float formats use FMA. One weight block is
// decoded once and dotted with up to kMaxCols activation vectors.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/activation.h"
#include "quant/blocks.h"
#include "quant/cpu_features.h"
#include "quant/dot.h"
#include "quant/float_bits.h"
#include "quant/kernel_common.h"
#include "util/avx2.h"

namespace epq::quant {
namespace {

// Sums of adjacent products of unsigned codes u (<= 127) and signed a: 8 int32 lanes.
inline __m256i dot_u8_i8(__m256i u, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}
// The same for signed codes w (|w| <= 128).
inline __m256i dot_i8_i8(__m256i w, __m256i a) {
  return dot_u8_i8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}
// 16 nibble pairs (low = element j, high = element j+16) as 32 bytes in element order.
inline __m256i nibbles32(const uint8_t* qs) {
  __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
}
// Bit k of each byte of v, as 0 or 1 per byte (k <= 7).
inline __m256i bit_of_bytes(__m256i v, int k) {
  return _mm256_and_si256(_mm256_srli_epi16(v, k), _mm256_set1_epi8(1));
}
// 32 bits -> 32 bytes: 0xFF where the bit is set.
inline __m256i bits_to_bytes(uint32_t bits) {
  const __m256i shuffle = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuffle);
  const __m256i mask = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
  v = _mm256_or_si256(v, mask);
  return _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1));
}
inline __m256i lookup16(const int8_t* table, __m256i idx) {
  __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(table));
  return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), idx);
}

// ---- 32-element formats against BlockQ8x32 activations ----
// A format decodes one block to 32 int8 codes, a scale d and an offset m (x = d*q + m).
struct Decoded32 {
  __m256i q;
  float d;
  float m;
};

// Q4_0 and Q5_0 codes are used unsigned, their offset (-8 or -16 times d) applied
// through the activation block's sum: cheaper than making the codes signed.
struct FmtQ4_0 {
  using Block = BlockQ4_0;
  static constexpr bool kUnsigned = true, kOffset = true;
  static Decoded32 decode(const Block& b) {
    const float d = f16_to_f32(b.d);
    return {nibbles32(b.qs), d, -8 * d};
  }
};
struct FmtQ4_1 {
  using Block = BlockQ4_1;
  static constexpr bool kUnsigned = true, kOffset = true;
  static Decoded32 decode(const Block& b) { return {nibbles32(b.qs), f16_to_f32(b.d), f16_to_f32(b.m)}; }
};
inline __m256i five_bit(const uint8_t* qs, const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return _mm256_or_si256(nibbles32(qs), _mm256_and_si256(bits_to_bytes(bits), _mm256_set1_epi8(0x10)));
}
struct FmtQ5_0 {
  using Block = BlockQ5_0;
  static constexpr bool kUnsigned = true, kOffset = true;
  static Decoded32 decode(const Block& b) {
    const float d = f16_to_f32(b.d);
    return {five_bit(b.qs, b.qh), d, -16 * d};
  }
};
struct FmtQ5_1 {
  using Block = BlockQ5_1;
  static constexpr bool kUnsigned = true, kOffset = true;
  static Decoded32 decode(const Block& b) { return {five_bit(b.qs, b.qh), f16_to_f32(b.d), f16_to_f32(b.m)}; }
};
struct FmtQ8_0 {
  using Block = BlockQ8_0;
  static constexpr bool kUnsigned = false, kOffset = false;
  static Decoded32 decode(const Block& b) { return {load256(b.qs), f16_to_f32(b.d), 0}; }
};
struct FmtIQ4_NL {
  using Block = BlockIQ4_NL;
  static constexpr bool kUnsigned = false, kOffset = false;
  static Decoded32 decode(const Block& b) { return {lookup16(kIQ4NLValues, nibbles32(b.qs)), f16_to_f32(b.d), 0}; }
};
struct FmtMXFP4 {
  using Block = BlockMXFP4;
  static constexpr bool kUnsigned = false, kOffset = false;
  static Decoded32 decode(const Block& b) { return {lookup16(kMXFP4Values, nibbles32(b.qs)), e8m0_to_f32_half(b.e), 0}; }
};

template <typename F>
struct Dot32 {
  template <int C>
  static void run(int64_t n, const void* w, const void* act, size_t stride, float* out) {
    const auto* wb = static_cast<const typename F::Block*>(w);
    const BlockQ8x32* a[C];
    __m256 acc[C];
    float offset[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8x32>(act, stride, c), acc[c] = _mm256_setzero_ps(), offset[c] = 0;
    for (int64_t b = 0; b < n / 32; ++b) {
      prefetch_ahead(wb + b);
      const Decoded32 x = F::decode(wb[b]);
      for (int c = 0; c < C; ++c) {
        const BlockQ8x32& ab = a[c][b];
        const __m256i av = load256(ab.qs);
        const __m256i p = F::kUnsigned ? dot_u8_i8(x.q, av) : dot_i8_i8(x.q, av);
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(x.d * ab.d), acc[c]);
        if (F::kOffset) offset[c] += x.m * ab.s;
      }
    }
    for (int c = 0; c < C; ++c) out[c] = hsum(acc[c]) + offset[c];
  }
};

// ---- 256-element formats against BlockQ8_K activations ----

// Row pairs in the Q4_K/Q5_K kernel (DotQ45K::matmul): the first row in a vector's low
// 128-bit half, the second in its high half.
// 16 bytes of each row, at p of the first and q of the second.
inline __m256i row_pair_load(const uint8_t* p, const uint8_t* q) {
  return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(q), reinterpret_cast<const __m128i*>(p));
}
// 16 bytes at p in both halves.
inline __m256i broadcast128(const void* p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
// Masks for k4_scales_and_mins_x2's bytes: scale k of each row in all of its half's 16-bit lanes.
alignas(32) constexpr uint8_t kRowPairScale[8][32] = {
#define EPQ_SCALE(k) {k, 0x80, k, 0x80, k, 0x80, k, 0x80, k, 0x80, k, 0x80, k, 0x80, k, 0x80, \
                      k, 0x80, k, 0x80, k, 0x80, k, 0x80, k, 0x80, k, 0x80, k, 0x80, k, 0x80}
    EPQ_SCALE(0), EPQ_SCALE(1), EPQ_SCALE(2), EPQ_SCALE(3), EPQ_SCALE(4), EPQ_SCALE(5), EPQ_SCALE(6), EPQ_SCALE(7)
#undef EPQ_SCALE
};
// Rows r (lanes 0-3) and r + 1 (lanes 4-7, if it is one of the n_rows) of a column: out[r], out[r + 1].
inline void store_row_pair(__m256 acc, int64_t r, int64_t n_rows, float* out) {
  const __m128 first = _mm256_castps256_ps128(acc), second = _mm256_extractf128_ps(acc, 1);
  const __m128 sums = _mm_hadd_ps(_mm_hadd_ps(first, second), _mm_setzero_ps());  // [first, second, 0, 0]
  out[r] = _mm_cvtss_f32(sums);
  if (r + 1 < n_rows) out[r + 1] = _mm_cvtss_f32(_mm_movehdup_ps(sums));
}

template <bool kFive>
struct DotQ45K {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;

  // Rows in pairs against C columns (C = 1 in decode). Each vector holds the first row
  // in its low 128-bit half and the second in its high half: one vpmaddubsw multiplies 16
  // codes of each row by the same 16 activations (broadcast to both halves), vpaddw adds
  // a sub-block's two such products, and one vpmaddwd applies each row's scale to its
  // half: two multiplies and no horizontal add per 32 products of each row. A block's
  // codes and scales are decoded once for all C columns. Per column and block, 32-bit
  // lanes 0-3 sum the first row and 4-7 the second, in the same order whatever the
  // partner (an odd last row is paired with itself).
  template <int C>
  static void matmul(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
                     size_t out_stride) {
    const BlockQ8_K* a[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t r = 0; r < n_rows; r += 2) {
      const auto* x0 = reinterpret_cast<const Block*>(w + static_cast<size_t>(r) * row_bytes);
      const auto* x1 = reinterpret_cast<const Block*>(w + static_cast<size_t>(std::min(r + 1, n_rows - 1)) * row_bytes);
      __m256 acc[C];
      for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
      for (int64_t b = 0; b < n / 256; ++b) {
        prefetch_lines(reinterpret_cast<const char*>(x0 + 2 * b) + kPrefetchBytes, 2 * sizeof(Block));
        const __m256i scales_mins = k4_scales_and_mins_x2(x0[b].scales, x1[b].scales);
        __m256i sum[C];
        for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
        // Q5_K: bit k of each byte is the fifth bit of sub-block k's elements 0-15 and 16-31.
        __m256i fifth_bits[2] = {};
        if constexpr (kFive) fifth_bits[0] = row_pair_load(x0[b].qh, x1[b].qh), fifth_bits[1] = row_pair_load(x0[b].qh + 16, x1[b].qh + 16);
        for (int j = 0; j < 4; ++j) {
          // Elements 0-15 and 16-31 of sub-blocks 2j (low nibbles) and 2j + 1 (high).
          const __m256i first = row_pair_load(x0[b].qs + 32 * j, x1[b].qs + 32 * j);
          const __m256i second = row_pair_load(x0[b].qs + 32 * j + 16, x1[b].qs + 32 * j + 16);
          for (int h = 0; h < 2; ++h) {
            const int k = 2 * j + h;  // the sub-block
            __m256i q0 = _mm256_and_si256(h == 0 ? first : _mm256_srli_epi16(first, 4), m4);
            __m256i q1 = _mm256_and_si256(h == 0 ? second : _mm256_srli_epi16(second, 4), m4);
            if constexpr (kFive) {
              q0 = _mm256_or_si256(q0, _mm256_slli_epi16(bit_of_bytes(fifth_bits[0], k), 4));
              q1 = _mm256_or_si256(q1, _mm256_slli_epi16(bit_of_bytes(fifth_bits[1], k), 4));
            }
            const __m256i scale = _mm256_shuffle_epi8(scales_mins, load256(kRowPairScale[k]));
            for (int c = 0; c < C; ++c) {
              const int8_t* aq = a[c][b].qs + 32 * k;
              const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(q0, broadcast128(aq)), _mm256_maddubs_epi16(q1, broadcast128(aq + 16)));
              sum[c] = _mm256_add_epi32(sum[c], _mm256_madd_epi16(p, scale));
            }
          }
        }
        // [d, dmin] of both rows, each in its row's half.
        uint32_t dm0, dm1;
        std::memcpy(&dm0, &x0[b].d, 4);
        std::memcpy(&dm1, &x1[b].d, 4);
        const __m256 dm = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(dm0)), static_cast<int>(dm1), 1)));
        const __m256 d = _mm256_permutevar8x32_ps(dm, _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2));
        const __m256 dmin = _mm256_permutevar8x32_ps(dm, _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3));
        const __m256i mins_low = _mm256_shuffle_epi8(scales_mins, load256(kRowPairMins[0]));
        const __m256i mins_high = _mm256_shuffle_epi8(scales_mins, load256(kRowPairMins[1]));
        for (int c = 0; c < C; ++c) {
          const __m256i min_sum = _mm256_add_epi32(_mm256_madd_epi16(mins_low, broadcast128(a[c][b].bsums)),
                                                   _mm256_madd_epi16(mins_high, broadcast128(a[c][b].bsums + 8)));
          const __m256 block = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(min_sum), _mm256_mul_ps(d, _mm256_cvtepi32_ps(sum[c])));
          acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(a[c][b].d), block, acc[c]);
        }
      }
      for (int c = 0; c < C; ++c) store_row_pair(acc[c], r, n_rows, out + static_cast<size_t>(c) * out_stride);
    }
  }
};

// Shuffle masks giving 16-bit lane 2g in the low half and lane 2g+1 in the high half.
alignas(32) constexpr uint8_t kPairMask[4][32] = {
#define EPQ_PAIR(k) {4 * k, 4 * k + 1, 4 * k, 4 * k + 1, 4 * k, 4 * k + 1, 4 * k, 4 * k + 1, 4 * k, 4 * k + 1, 4 * k, 4 * k + 1, \
                     4 * k, 4 * k + 1, 4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3, 4 * k + 2, 4 * k + 3, 4 * k + 2, 4 * k + 3,     \
                     4 * k + 2, 4 * k + 3, 4 * k + 2, 4 * k + 3, 4 * k + 2, 4 * k + 3, 4 * k + 2, 4 * k + 3, 4 * k + 2, 4 * k + 3}
    EPQ_PAIR(0), EPQ_PAIR(1), EPQ_PAIR(2), EPQ_PAIR(3)
#undef EPQ_PAIR
};

// Column pairs in the Q6_K kernel: two columns' vpmaddubsw results are added in adjacent
// pairs by vphaddw before one vpmaddwd applies the scale for both (three multiplies per
// 64 products instead of four). A pair's vector then holds column 2p in 32-bit lanes 0-1
// and 4-5 and column 2p + 1 in lanes 2-3 and 6-7. Each block's lanes are added into one
// exact integer per column before any float rounding, so a column gives the same bits
// paired, alone or with any partner.
struct DotQ6K {
  // Group g of half h (elements h*128 + 32g + l): its 32 codes, from ql[32 * (g & 1) + l]
  // (low nibble for g < 2, high otherwise) and bits 2g..2g+1 of qh[l] (the Q6_K layout),
  // and the scales of its two 16-element sub-blocks, 8h + 2g in the low 128-bit half and
  // 8h + 2g + 1 in the high. scales_half holds scales 8h..8h+7 in both halves.
  struct Group {
    __m256i q, s;
  };
  static Group group(const BlockQ6_K& x, __m256i qh, __m256i scales_half, int h, int g) {
    const __m256i ql = load256(x.ql + 64 * h + 32 * (g & 1));
    const __m256i low = _mm256_and_si256(g < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), _mm256_set1_epi8(3));
    return {_mm256_or_si256(low, _mm256_slli_epi16(high, 4)), _mm256_shuffle_epi8(scales_half, load256(kPairMask[g]))};
  }
  // Codes are stored +32: each column's sum starts at -32 * sum(scale * bsum).
  static __m256i offset(__m256i scales16, const BlockQ8_K& a) { return _mm256_slli_epi32(_mm256_madd_epi16(scales16, load256(a.bsums)), 5); }

  // For C = 1 the column alone; otherwise columns in pairs (see above).
  template <int C>
  static void run(int64_t n, const void* w, const void* act, size_t stride, float* out) {
    constexpr bool kPaired = C > 1;
    constexpr int P = kPaired ? (C + 1) / 2 : 1;  // accumulators
    const auto* wb = static_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* a[2 * P];
    for (int c = 0; c < 2 * P; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c < C ? c : C - 1);
    float acc[2 * P] = {};  // per column
    for (int64_t b = 0; b < n / 256; ++b) {
      prefetch_ahead(wb + b);
      const BlockQ6_K& x = wb[b];
      const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales)));
      // Scales 0-7 and 8-15 each broadcast to both halves, for the per-group shuffles.
      const __m256i scales_half[2] = {_mm256_permute4x64_epi64(scales16, 0x44), _mm256_permute4x64_epi64(scales16, 0xEE)};
      __m256i sum[P];
      for (int p = 0; p < P; ++p) {
        const __m256i off = kPaired ? _mm256_hadd_epi32(offset(scales16, a[2 * p][b]), offset(scales16, a[2 * p + 1][b]))
                                    : offset(scales16, a[0][b]);
        sum[p] = _mm256_sub_epi32(_mm256_setzero_si256(), off);
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i qh = load256(x.qh + 32 * h);
        for (int g = 0; g < 4; ++g) {
          const Group gr = group(x, qh, scales_half[h], h, g);
          const int at = 128 * h + 32 * g;
          for (int p = 0; p < P; ++p) {
            const __m256i prod = kPaired ? _mm256_hadd_epi16(_mm256_maddubs_epi16(gr.q, load256(a[2 * p][b].qs + at)),
                                                              _mm256_maddubs_epi16(gr.q, load256(a[2 * p + 1][b].qs + at)))
                                         : _mm256_maddubs_epi16(gr.q, load256(a[0][b].qs + at));
            sum[p] = _mm256_add_epi32(sum[p], _mm256_madd_epi16(prod, gr.s));
          }
        }
      }
      // Each column's block total as an exact integer first, so that its float sum is the
      // same whether it was paired or alone.
      const float d = f16_to_f32(x.d);
      for (int p = 0; p < P; ++p) {
        const __m128i halves = _mm_add_epi32(_mm256_castsi256_si128(sum[p]), _mm256_extracti128_si256(sum[p], 1));
        const __m128i pairs = _mm_hadd_epi32(halves, halves);  // paired: [column 2p, column 2p + 1, ..]
        if constexpr (kPaired) {
          acc[2 * p] = std::fma(d * a[2 * p][b].d, static_cast<float>(_mm_cvtsi128_si32(pairs)), acc[2 * p]);
          acc[2 * p + 1] = std::fma(d * a[2 * p + 1][b].d, static_cast<float>(_mm_extract_epi32(pairs, 1)), acc[2 * p + 1]);
        } else {
          acc[0] = std::fma(d * a[0][b].d, static_cast<float>(_mm_cvtsi128_si32(_mm_hadd_epi32(pairs, pairs))), acc[0]);
        }
      }
    }
    for (int c = 0; c < C; ++c) out[c] = acc[c];
  }
};

// Q2_K and Q3_K share the 2-bit plane layout: element h*128 + 32j + l holds bits 2j of
// qs[32h + l]; sub-blocks of 16 elements.
template <bool kThree>
struct DotQ23K {
  using Block = std::conditional_t<kThree, BlockQ3_K, BlockQ2_K>;
  template <int C>
  static void run(int64_t n, const void* w, const void* act, size_t stride, float* out) {
    const auto* wb = static_cast<const Block*>(w);
    const BlockQ8_K* a[C];
    __m256 acc[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c), acc[c] = _mm256_setzero_ps();
    const __m256i m2 = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < n / 256; ++b) {
      prefetch_ahead(wb + b);
      const Block& x = wb[b];
      const Q23KScales sc = q23_k_scales(x);
      const __m128i scales8 = sc.scales, offsets8 = sc.offsets;
      const float d = f16_to_f32(x.d);
      const __m256i offsets16 = _mm256_cvtepi8_epi16(offsets8);
      const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
      const __m256i scales_low = _mm256_permute4x64_epi64(scales16, 0x44), scales_high = _mm256_permute4x64_epi64(scales16, 0xEE);
      __m256i hbits = _mm256_setzero_si256();
      if constexpr (kThree) hbits = load256(x.hmask);
      __m256i sum[C];
      for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i bits = load256(x.qs + 32 * h);
        for (int j = 0; j < 4; ++j) {
          __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m2);
          if constexpr (kThree) q = _mm256_or_si256(q, _mm256_slli_epi16(bit_of_bytes(hbits, 4 * h + j), 2));
          const __m256i s = _mm256_shuffle_epi8(h == 0 ? scales_low : scales_high, load256(kPairMask[j]));
          for (int c = 0; c < C; ++c) {
            sum[c] = _mm256_add_epi32(sum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(a[c][b].qs + 128 * h + 32 * j)), s));
          }
        }
      }
      for (int c = 0; c < C; ++c) {
        const __m256i off = _mm256_madd_epi16(offsets16, load256(a[c][b].bsums));
        const float da = a[c][b].d;
        if constexpr (kThree) {
          const __m256i total = _mm256_sub_epi32(sum[c], _mm256_slli_epi32(off, 2));
          acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * da), _mm256_cvtepi32_ps(total), acc[c]);
        } else {
          acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * da), _mm256_cvtepi32_ps(sum[c]), acc[c]);
          acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(-f16_to_f32(x.dmin) * da), _mm256_cvtepi32_ps(off), acc[c]);
        }
      }
    }
    for (int c = 0; c < C; ++c) out[c] = hsum(acc[c]);
  }
};

struct DotIQ4XS {
  template <int C>
  static void run(int64_t n, const void* w, const void* act, size_t stride, float* out) {
    const auto* wb = static_cast<const BlockIQ4_XS*>(w);
    const BlockQ8_K* a[C];
    __m256 acc[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c), acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b) {
      prefetch_ahead(wb + b);
      const BlockIQ4_XS& x = wb[b];
      __m256i sum[C];
      for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        const int ls = iq4_xs_scale(x, s);
        const __m256i q = lookup16(kIQ4NLValues, nibbles32(x.qs + 16 * s));
        const __m256i q_abs = _mm256_sign_epi8(q, q);
        const __m256i scale = _mm256_set1_epi16(static_cast<int16_t>(ls));  // applied while widening the pair sums
        for (int c = 0; c < C; ++c) {
          const __m256i pairs = _mm256_maddubs_epi16(q_abs, _mm256_sign_epi8(load256(a[c][b].qs + 32 * s), q));
          sum[c] = _mm256_add_epi32(sum[c], _mm256_madd_epi16(pairs, scale));
        }
      }
      const float d = f16_to_f32(x.d);
      for (int c = 0; c < C; ++c) acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * a[c][b].d), _mm256_cvtepi32_ps(sum[c]), acc[c]);
    }
    for (int c = 0; c < C; ++c) out[c] = hsum(acc[c]);
  }
};

struct DotQ8K {
  template <int C>
  static void run(int64_t n, const void* w, const void* act, size_t stride, float* out) {
    const auto* wb = static_cast<const BlockQ8_K*>(w);
    const BlockQ8_K* a[C];
    __m256 acc[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c), acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b) {
      prefetch_ahead(wb + b);
      for (int c = 0; c < C; ++c) {
        __m256i sum = _mm256_setzero_si256();
        for (int k = 0; k < 8; ++k) sum = _mm256_add_epi32(sum, dot_i8_i8(load256(wb[b].qs + 32 * k), load256(a[c][b].qs + 32 * k)));
        acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(wb[b].d * a[c][b].d), _mm256_cvtepi32_ps(sum), acc[c]);
      }
    }
    for (int c = 0; c < C; ++c) out[c] = hsum(acc[c]);
  }
};

// ---- float formats against F32 activations (DotFloat, kernel_common.h) ----
// 16 floats as two 256-bit halves.
struct Floats16x2 {
  struct T {
    __m256 low, high;
  };
  static constexpr int kAccumulators = 4;  // 16-float sums in registers at once: 8 of the 16
  static T zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static T load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  template <typename L>
  static T load_weights(const void* w, int64_t i) { return {L::load8(w, i), L::load8(w, i + 8)}; }
  static T fmadd(T w, T a, T acc) { return {_mm256_fmadd_ps(w.low, a.low, acc.low), _mm256_fmadd_ps(w.high, a.high, acc.high)}; }
  static float sum(T acc) { return hsum(_mm256_add_ps(acc.low, acc.high)); }
};

KernelSet make_avx2() {
  KernelSet s{"avx2", {}};
  auto set = [&](Type t, DotKernel k) { s.dot[static_cast<uint32_t>(t)] = k; };
  set(Type::F32, entry<DotFloat<LoadF32, Floats16x2>>);
  set(Type::F16, entry<DotFloat<LoadF16, Floats16x2>>);
  set(Type::BF16, entry<DotFloat<LoadBF16, Floats16x2>>);
  set(Type::Q4_0, entry<Dot32<FmtQ4_0>>);
  set(Type::Q4_1, entry<Dot32<FmtQ4_1>>);
  set(Type::Q5_0, entry<Dot32<FmtQ5_0>>);
  set(Type::Q5_1, entry<Dot32<FmtQ5_1>>);
  set(Type::Q8_0, entry<Dot32<FmtQ8_0>>);
  set(Type::IQ4_NL, entry<Dot32<FmtIQ4_NL>>);
  set(Type::MXFP4, entry<Dot32<FmtMXFP4>>);
  set(Type::Q2_K, entry<DotQ23K<false>>);
  set(Type::Q3_K, entry<DotQ23K<true>>);
  set(Type::Q4_K, entry<DotQ45K<false>>);
  set(Type::Q5_K, entry<DotQ45K<true>>);
  set(Type::Q6_K, entry<DotQ6K>);
  set(Type::Q8_K, entry<DotQ8K>);
  set(Type::IQ4_XS, entry<DotIQ4XS>);
  return s;
}

}  // namespace

const KernelSet* avx2_kernels() {
  static const KernelSet s = make_avx2();
  return cpu_features().avx2 ? &s : nullptr;
}

}  // namespace epq::quant
