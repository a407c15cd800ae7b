// AVX2 dot kernels (with FMA and F16C). Integer formats multiply int8 codes with
// vpmaddubsw and scale per block (the 32-element formats in row pairs, four blocks at a
// time); float formats use FMA. One weight block is decoded once and dotted with up
// to kMaxCols activation vectors.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

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
// Bit k of each byte of v moved to bit `to` of the byte, its other bits 0 (k, to <= 7):
// one shift and one mask.
inline __m256i bit_of_bytes_at(__m256i v, int k, int to) {
  const __m256i moved = k >= to ? _mm256_srli_epi16(v, k - to) : _mm256_slli_epi16(v, to - k);
  return _mm256_and_si256(moved, _mm256_set1_epi8(static_cast<char>(1 << to)));
}

// Rows in pairs, as the Q4_K/Q5_K kernel takes them: each vector holds 16 bytes of the
// first row in its low 128-bit half and the same 16 of the second row in its high half.
// 16 bytes of each row, at p of the first and q of the second.
inline __m256i row_pair_load(const void* p, const void* q) {
  return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(q), reinterpret_cast<const __m128i*>(p));
}
// 16 bytes at p in both halves.
inline __m256i broadcast128(const void* p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p))); }

// ---- 32-element formats against BlockQ8x32 activations ----
// Rows in pairs: one vpmaddubsw multiplies 16 codes of each row by the same 16
// activations, broadcast to both halves. Blocks go in groups of four: per row, the integer
// dot products of the four blocks are gathered into its half [b0 b1 b2 b3] by horizontal
// adds (which work within halves), converted and scaled together: one conversion and two
// multiplies per group, column and pair of rows. Each half does what the row alone would,
// so a row's result does not depend on its partner (an odd last row is paired with itself).
// Against one row at a time in 128-bit vectors this halves the vector operations per
// block (docs/PERFORMANCE.md, "Zen 3: the AVX2 set's 32-element formats in row pairs");
// CPUs that split 256-bit operations in two (Zen 1) do about the same work either way.

// A pair of blocks' codes: elements 0-15 and 16-31 of each row.
struct Codes32 {
  __m256i low, high;
};
// 16 nibble pairs of each row (low nibble = element j, high = element j+16).
inline Codes32 nibbles16x2(__m256i x) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  return {_mm256_and_si256(x, m4), _mm256_and_si256(_mm256_srli_epi16(x, 4), m4)};
}
// Byte k of kFifthBits[v] is 0x10 where bit k of v is set: the fifth bit of a Q5 code in place.
constexpr std::array<uint64_t, 256> kFifthBits = [] {
  std::array<uint64_t, 256> t{};
  for (int v = 0; v < 256; ++v) {
    for (int k = 0; k < 8; ++k) t[v] |= uint64_t{(v >> k) & 1u} << (8 * k + 4);
  }
  return t;
}();
// Bits 0-15 of `bits` to 16 bytes, 0x10 where the bit is set: two look-ups in kFifthBits
// (2 KiB, in L1), on the integer side, where the vector units are the busy ones.
inline __m128i fifth_bits16(uint32_t bits) {
  const __m128i low = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&kFifthBits[bits & 0xFF]));
  return _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(low), reinterpret_cast<const double*>(&kFifthBits[(bits >> 8) & 0xFF])));
}
template <typename Block>
inline Codes32 five_bit(const Block& x0, const Block& x1) {
  uint32_t first, second;
  std::memcpy(&first, x0.qh, 4);
  std::memcpy(&second, x1.qh, 4);
  const Codes32 low4 = nibbles16x2(row_pair_load(x0.qs, x1.qs));
  return {_mm256_or_si256(low4.low, _mm256_set_m128i(fifth_bits16(second), fifth_bits16(first))),
          _mm256_or_si256(low4.high, _mm256_set_m128i(fifth_bits16(second >> 16), fifth_bits16(first >> 16)))};
}
inline Codes32 lookup16x2(const int8_t* table, Codes32 idx) {
  const __m256i t = broadcast128(table);
  return {_mm256_shuffle_epi8(t, idx.low), _mm256_shuffle_epi8(t, idx.high)};
}
// The F16 field at byte `at` of blocks b[0..count) (count <= 4), 0 past count, as the
// bits of four F16 values. Gathered in an integer register: the integer units are idle,
// the vector units are not.
template <typename Block>
inline uint64_t f16_field4(const Block* b, size_t at, int count) {
  uint64_t bits = 0;
  for (int k = 0; k < count; ++k) {
    uint16_t h;
    std::memcpy(&h, reinterpret_cast<const uint8_t*>(b + k) + at, 2);
    bits |= uint64_t{h} << (16 * k);
  }
  return bits;
}
// That field of both rows' blocks as floats, each row in its half.
template <typename Block>
inline __m256 f16_field4x2(const Block* x0, const Block* x1, size_t at, int count) {
  return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<long long>(f16_field4(x1, at, count)), static_cast<long long>(f16_field4(x0, at, count))));
}

// The same for count = 4 with four 16-byte loads, the k-th from 2k bytes before block k's
// field (inside the row: block k - 1 ends there), blended, putting block k's field in 16-bit
// lane k of each half. Faster for IQ4_NL only (Zen 3, scripts/kernel_ab.sh: IQ4_NL 1.05-1.08x;
// Q4_0 and Q5_0 0.91-0.94x, Q8_0 0.93-0.99x, Q4_1 and Q5_1 0.96-1.02x).
template <size_t At, typename Block>
inline __m256 f16_field4x2_blended(const Block* x0, const Block* x1) {
  static_assert(At + 10 <= sizeof(Block));  // the last load ends inside block 3
  constexpr size_t kStep = sizeof(Block) - 2;
  const auto* p = reinterpret_cast<const uint8_t*>(x0) + At;
  const auto* q = reinterpret_cast<const uint8_t*>(x1) + At;
  __m256i v = _mm256_blend_epi16(row_pair_load(p, q), row_pair_load(p + kStep, q + kStep), 0x02);
  v = _mm256_blend_epi16(v, row_pair_load(p + 2 * kStep, q + 2 * kStep), 0x04);
  v = _mm256_blend_epi16(v, row_pair_load(p + 3 * kStep, q + 3 * kStep), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(v, 0x08)));  // lanes 0-3 of each half
}

// How a block's int16 pair sums may be added before they overflow (activations
// |a| <= 127): four blocks (codes <= 15: 16 products <= 30480), two (codes <= 31: 8
// products <= 31496), or none (|code| <= 127: widened to int32 at once).
enum class Headroom { kFourBlocks, kTwoBlocks, kNone };

// How vpmaddubsw, which takes one unsigned operand, gets signed codes q: as |q| against
// a * sign(q) (any code, -128 too), or as q * sign(a) against |a| (codes >= -127), whose
// magnitudes are made once per call for all its rows: one vpsignb per 16 codes, not two.
// Both give the same integer products, so a kernel may choose either per call.
enum class Signs { kUnsignedCodes, kCodeMagnitudes, kActivationMagnitudes };

// A format: its block, how its signs are handled, its headroom, the codes of a pair of
// blocks x0 and x1 (one of each row), their scales d and (formats with an offset) offsets
// m for blocks x0[0..count) and x1[0..count), 0 past count: x = d*q + m. Most formats keep
// d as an F16 field `d` of the block.
template <typename B>
struct F16Scaled {
  using Block = B;
  static __m256 scales(const Block* x0, const Block* x1, int count) { return f16_field4x2(x0, x1, offsetof(Block, d), count); }
};
// Q4_0 and Q5_0 codes are used unsigned, their offset (-8 or -16 times d) applied
// through the activation block's sum: cheaper than making the codes signed.
struct FmtQ4_0 : F16Scaled<BlockQ4_0> {
  static constexpr Signs kSigns = Signs::kUnsignedCodes;
  static constexpr Headroom kHeadroom = Headroom::kFourBlocks;
  static Codes32 codes(const Block& x0, const Block& x1) { return nibbles16x2(row_pair_load(x0.qs, x1.qs)); }
  static __m256 offsets(const Block*, const Block*, __m256 d, int) { return _mm256_mul_ps(d, _mm256_set1_ps(-8)); }
};
struct FmtQ4_1 : F16Scaled<BlockQ4_1> {
  static constexpr Signs kSigns = Signs::kUnsignedCodes;
  static constexpr Headroom kHeadroom = Headroom::kFourBlocks;
  static Codes32 codes(const Block& x0, const Block& x1) { return nibbles16x2(row_pair_load(x0.qs, x1.qs)); }
  static __m256 offsets(const Block* x0, const Block* x1, __m256, int count) { return f16_field4x2(x0, x1, offsetof(Block, m), count); }
};
struct FmtQ5_0 : F16Scaled<BlockQ5_0> {
  static constexpr Signs kSigns = Signs::kUnsignedCodes;
  static constexpr Headroom kHeadroom = Headroom::kTwoBlocks;
  static Codes32 codes(const Block& x0, const Block& x1) { return five_bit(x0, x1); }
  static __m256 offsets(const Block*, const Block*, __m256 d, int) { return _mm256_mul_ps(d, _mm256_set1_ps(-16)); }
};
struct FmtQ5_1 : F16Scaled<BlockQ5_1> {
  static constexpr Signs kSigns = Signs::kUnsignedCodes;
  static constexpr Headroom kHeadroom = Headroom::kTwoBlocks;
  static Codes32 codes(const Block& x0, const Block& x1) { return five_bit(x0, x1); }
  static __m256 offsets(const Block* x0, const Block* x1, __m256, int count) { return f16_field4x2(x0, x1, offsetof(Block, m), count); }
};
struct FmtQ8_0 : F16Scaled<BlockQ8_0> {
  static constexpr Signs kSigns = Signs::kCodeMagnitudes;  // files from other tools may hold -128
  static constexpr Headroom kHeadroom = Headroom::kNone;
  static Codes32 codes(const Block& x0, const Block& x1) {
    return {row_pair_load(x0.qs, x1.qs), row_pair_load(x0.qs + 16, x1.qs + 16)};
  }
};
struct FmtIQ4_NL : F16Scaled<BlockIQ4_NL> {
  static constexpr Signs kSigns = Signs::kActivationMagnitudes;  // codes -127..113; one column only (see Dot32)
  static constexpr Headroom kHeadroom = Headroom::kNone;
  static Codes32 codes(const Block& x0, const Block& x1) { return lookup16x2(kIQ4NLValues, nibbles16x2(row_pair_load(x0.qs, x1.qs))); }
  static __m256 scales(const Block* x0, const Block* x1, int count) {
    return count == 4 ? f16_field4x2_blended<offsetof(Block, d)>(x0, x1) : f16_field4x2(x0, x1, offsetof(Block, d), count);
  }
};
// MXFP4 codes (|q| <= 12) are used unsigned, stored + 12 (0..24), with the offset -12 d.
struct FmtMXFP4 {
  using Block = BlockMXFP4;
  static constexpr Signs kSigns = Signs::kUnsignedCodes;
  static constexpr Headroom kHeadroom = Headroom::kTwoBlocks;
  static constexpr std::array<int8_t, 16> kPlus12 = [] {
    std::array<int8_t, 16> t{};
    for (int i = 0; i < 16; ++i) t[i] = static_cast<int8_t>(kMXFP4Values[i] + 12);
    return t;
  }();
  static Codes32 codes(const Block& x0, const Block& x1) { return lookup16x2(kPlus12.data(), nibbles16x2(row_pair_load(x0.qs, x1.qs))); }
  // e8m0_to_f32_half on each row's four lanes: (e - 1) << 23, or 2^21 << e for e < 2; 0 past count.
  static __m256 scales(const Block* x0, const Block* x1, int count) {
    uint64_t bytes = 0;
    for (int k = 0; k < count; ++k) bytes |= uint64_t{x0[k].e} << (8 * k) | uint64_t{x1[k].e} << (8 * k + 32);
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i past = _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3));
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_blendv_epi8(small, normal, _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1))), past));
  }
  static __m256 offsets(const Block*, const Block*, __m256 d, int) { return _mm256_mul_ps(d, _mm256_set1_ps(-12)); }
};

// |a| of every activation code of columns 0..n_cols-1, for kernels of signed codes that
// give vpmaddubsw the activations' magnitudes as its unsigned operand (Signs::
// kActivationMagnitudes): column c's n magnitudes at c * n, in element order. Made once
// per call, for all of its rows, in a buffer of the calling thread's.
const uint8_t* activation_magnitudes(int64_t n, const void* act, size_t stride, int n_cols) {
  thread_local std::vector<uint8_t> buffer;
  buffer.resize(static_cast<size_t>(n * n_cols));
  for (int c = 0; c < n_cols; ++c) {
    const BlockQ8x32* a = act_col<BlockQ8x32>(act, stride, c);
    uint8_t* out = buffer.data() + c * n;
    for (int64_t b = 0; b < n / 32; ++b) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * b), _mm256_abs_epi8(load256(a[b].qs)));
  }
  return buffer.data();
}

template <typename F>
struct Dot32 {
  using Block = typename F::Block;
  static constexpr bool kOffset = requires { F::offsets; };
  // The signs for C columns. Activation magnitudes cost a second load per activation
  // vector, which with more columns outweighs the vpsignb of the codes they save (on a
  // Zen 1, IQ4_NL: 1 column +13%, 4 columns -16%); from two columns on, the codes'
  // magnitudes are used, giving the same bits.
  template <int C>
  static constexpr Signs kSignsFor = F::kSigns == Signs::kActivationMagnitudes && C > 1 ? Signs::kCodeMagnitudes : F::kSigns;
  // A pair of blocks' codes as vpmaddubsw takes them: `mul`, unsigned (the codes, or their
  // magnitudes for Signs::kCodeMagnitudes), and for signed codes the codes themselves.
  struct Operands {
    Codes32 mul, sign;
  };
  template <Signs S>
  static Operands operands(const Block& x0, const Block& x1) {
    const Codes32 q = F::codes(x0, x1);
    if constexpr (S == Signs::kCodeMagnitudes) return {{_mm256_sign_epi8(q.low, q.low), _mm256_sign_epi8(q.high, q.high)}, q};
    return {q, q};
  }
  // A pair of blocks' dot products with activation block a, block `at` of its column
  // (whose magnitudes are `magnitudes`, for Signs::kActivationMagnitudes), as lanes of
  // each half that add up to its row's: int16 lanes, or int32 lanes for Headroom::kNone.
  template <Signs S>
  static __m256i block_sum(const Operands& x, const BlockQ8x32& a, const uint8_t* magnitudes, int64_t at) {
    __m256i u_low = x.mul.low, u_high = x.mul.high;
    __m256i a_low = broadcast128(a.qs), a_high = broadcast128(a.qs + 16);
    if constexpr (S == Signs::kCodeMagnitudes) {
      a_low = _mm256_sign_epi8(a_low, x.sign.low), a_high = _mm256_sign_epi8(a_high, x.sign.high);
    } else if constexpr (S == Signs::kActivationMagnitudes) {
      u_low = broadcast128(magnitudes + 32 * at), u_high = broadcast128(magnitudes + 32 * at + 16);
      a_low = _mm256_sign_epi8(x.sign.low, a_low), a_high = _mm256_sign_epi8(x.sign.high, a_high);
    }
    const __m256i low = _mm256_maddubs_epi16(u_low, a_low), high = _mm256_maddubs_epi16(u_high, a_high);
    if constexpr (F::kHeadroom == Headroom::kNone) {
      const __m256i ones = _mm256_set1_epi16(1);
      return _mm256_add_epi32(_mm256_madd_epi16(low, ones), _mm256_madd_epi16(high, ones));
    }
    return _mm256_add_epi16(low, high);
  }
  // Four block pairs' lanes (block_sum) to [b0 b1 b2 b3] of each row in int32.
  static __m256i gather_sums(const __m256i (&p)[4]) {
    const __m256i ones = _mm256_set1_epi16(1);
    if constexpr (F::kHeadroom == Headroom::kFourBlocks) {
      return _mm256_madd_epi16(_mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3])), ones);
    } else if constexpr (F::kHeadroom == Headroom::kTwoBlocks) {
      return _mm256_hadd_epi32(_mm256_madd_epi16(_mm256_hadd_epi16(p[0], p[1]), ones), _mm256_madd_epi16(_mm256_hadd_epi16(p[2], p[3]), ones));
    } else {
      return _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    }
  }
  // Activation blocks a[0..count): their scales d and sums s (see BlockQ8x32) in both
  // halves, 0 past count.
  static void act_scales(const BlockQ8x32* a, int count, __m256& d, __m256& s) {
    __m128d ds[4];
    for (int k = 0; k < 4; ++k) ds[k] = k < count ? _mm_load_sd(reinterpret_cast<const double*>(&a[k].d)) : _mm_setzero_pd();
    const __m128 first = _mm_castpd_ps(_mm_unpacklo_pd(ds[0], ds[1])), second = _mm_castpd_ps(_mm_unpacklo_pd(ds[2], ds[3]));
    const __m128 d4 = _mm_shuffle_ps(first, second, _MM_SHUFFLE(2, 0, 2, 0)), s4 = _mm_shuffle_ps(first, second, _MM_SHUFFLE(3, 1, 3, 1));
    d = _mm256_set_m128(d4, d4), s = _mm256_set_m128(s4, s4);
  }

  // Blocks x0[0..count) and x1[0..count) (count <= 4) against columns a[c] + b: each
  // row's lanes k of each column add d_k * (da_k * dot_k) + m_k * sa_k. A column's sums
  // do not depend on C.
  template <int C>
  [[gnu::always_inline]] static void group(const Block* x0, const Block* x1, const BlockQ8x32* const (&a)[C],
                                           const uint8_t* const (&magnitudes)[C], int64_t b, int count, __m256 (&acc)[C]) {
    Operands ops[4];
    for (int k = 0; k < count; ++k) ops[k] = operands<kSignsFor<C>>(x0[k], x1[k]);
    const __m256 d = F::scales(x0, x1, count);
    __m256 m = _mm256_setzero_ps();
    if constexpr (kOffset) m = F::offsets(x0, x1, d, count);
    for (int c = 0; c < C; ++c) {
      __m256i p[4];
      for (int k = 0; k < 4; ++k) {
        p[k] = k < count ? block_sum<kSignsFor<C>>(ops[k], a[c][b + k], magnitudes[c], b + k) : _mm256_setzero_si256();
      }
      __m256 ad, as;
      act_scales(a[c] + b, count, ad, as);
      acc[c] = _mm256_fmadd_ps(d, _mm256_mul_ps(_mm256_cvtepi32_ps(gather_sums(p)), ad), acc[c]);
      if constexpr (kOffset) acc[c] = _mm256_fmadd_ps(m, as, acc[c]);
    }
  }

  template <int C>
  static void matmul(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
                     size_t out_stride) {
    const uint8_t* magnitudes = nullptr;
    if constexpr (kSignsFor<C> == Signs::kActivationMagnitudes) magnitudes = activation_magnitudes(n, act, stride, C);
    const BlockQ8x32* a[C];
    const uint8_t* mag[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8x32>(act, stride, c), mag[c] = magnitudes == nullptr ? nullptr : magnitudes + c * n;
    const int64_t blocks = n / 32;
    for (int64_t r = 0; r < n_rows; r += 2) {
      const auto* x0 = reinterpret_cast<const Block*>(w + static_cast<size_t>(r) * row_bytes);
      const auto* x1 = reinterpret_cast<const Block*>(w + static_cast<size_t>(std::min(r + 1, n_rows - 1)) * row_bytes);
      __m256 acc[C];
      for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
      int64_t b = 0;
      for (; b + 4 <= blocks; b += 4) {
        // The pair reads its two rows' bytes at twice the pace of one: so does the prefetch.
        prefetch_lines(reinterpret_cast<const char*>(x0 + 2 * b) + kPrefetchBytes, 8 * sizeof(Block));
        group<C>(x0 + b, x1 + b, a, mag, b, 4, acc);
      }
      if (b < blocks) group<C>(x0 + b, x1 + b, a, mag, b, static_cast<int>(blocks - b), acc);
      for (int c = 0; c < C; ++c) {
        float* o = out + static_cast<size_t>(c) * out_stride;
        o[r] = hsum(_mm256_castps256_ps128(acc[c]));
        if (r + 1 < n_rows) o[r + 1] = hsum(_mm256_extractf128_ps(acc[c], 1));
      }
    }
  }
};

// ---- 256-element formats against BlockQ8_K activations ----

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
              q0 = _mm256_or_si256(q0, bit_of_bytes_at(fifth_bits[0], k, 4));
              q1 = _mm256_or_si256(q1, bit_of_bytes_at(fifth_bits[1], k, 4));
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
// qs[32h + l]; sub-blocks of 16 elements, so a 32-code group j of half h holds sub-block
// 8h + 2j in its low 128-bit half and 8h + 2j + 1 in its high half.
//
// Q3_K multiplies each group's vpmaddubsw pair sums by their sub-block's scale with
// vpmaddwd. Q2_K's scales (0..15) and codes (0..3) are small enough to be multiplied
// before: a look-up table gives s * q (<= 45) for code q, so vpmaddubsw makes the scaled
// pair sums (<= 2 * 45 * 127 = 11430), two groups are added in int16, and one vpmaddwd by
// 1 widens them: three multiplies per 64 codes and column, not four. Building the tables
// pays with several columns (prompts); one column (decode) keeps the scale-after route,
// which was faster there. The 32-bit lanes hold the same integers either way, so the
// bits are the same too.
template <bool kThree>
struct DotQ23K {
  using Block = std::conditional_t<kThree, BlockQ3_K, BlockQ2_K>;

  // Q2_K's tables: table[2h + J] serves groups j = 2J and 2J + 1 of half h, indexed by
  // group 2J's code q (byte q) or group 2J + 1's (byte 4q), so both index straight from
  // the code bits under a mask. In the low 128-bit half byte q (or 4q) is the scaled code
  // scale[8h + 2j] * q, in the high half scale[8h + 2j + 1] * q; byte 0 is 0 for both.
  struct Tables {
    __m256i t[4];
  };
  static Tables scaled_code_tables(__m128i scales) {
    // Scales of even sub-blocks 0-6, odd 1-7, even 8-14, odd 9-15.
    const __m128i s1 = _mm_shuffle_epi8(scales, _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15));
    const __m128i s2 = _mm_add_epi8(s1, s1), s3 = _mm_add_epi8(s2, s1);
    const __m128i zero = _mm_setzero_si128();
    const __m128i first[2] = {_mm_unpacklo_epi8(zero, s1), _mm_unpackhi_epi8(zero, s1)};  // [0, s] pairs
    const __m128i second[2] = {_mm_unpacklo_epi8(s2, s3), _mm_unpackhi_epi8(s2, s3)};     // [2s, 3s] pairs
    // by_group: byte 4j + q = scale * q for the four groups j of a half, as above.
    const __m256i pick[2] = {_mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 2, 3, 5, -1, -1, -1, 6, -1, -1, -1, 7, -1, -1, -1)),
                             _mm256_broadcastsi128_si256(_mm_setr_epi8(8, 9, 10, 11, 13, -1, -1, -1, 14, -1, -1, -1, 15, -1, -1, -1))};
    Tables t;
    for (int h = 0; h < 2; ++h) {
      const __m256i by_group = _mm256_set_m128i(_mm_unpackhi_epi16(first[h], second[h]), _mm_unpacklo_epi16(first[h], second[h]));
      for (int J = 0; J < 2; ++J) t.t[2 * h + J] = _mm256_shuffle_epi8(by_group, pick[J]);
    }
    return t;
  }

  template <int C>
  static void run(int64_t n, const void* w, const void* act, size_t stride, float* out) {
    constexpr bool kScaledCodes = !kThree && C > 1;  // see above
    const auto* wb = static_cast<const Block*>(w);
    const BlockQ8_K* a[C];
    __m256 acc[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c), acc[c] = _mm256_setzero_ps();
    const __m256i m2 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < n / 256; ++b) {
      prefetch_ahead(wb + b);
      const Block& x = wb[b];
      const Q23KScales sc = q23_k_scales(x);
      const float d = f16_to_f32(x.d);
      const __m256i offsets16 = _mm256_cvtepi8_epi16(sc.offsets);
      __m256i scales_half[2], hbits = _mm256_setzero_si256();
      Tables tables{};
      if constexpr (kScaledCodes) {
        tables = scaled_code_tables(sc.scales);
      } else {
        const __m256i scales16 = _mm256_cvtepi8_epi16(sc.scales);
        scales_half[0] = _mm256_permute4x64_epi64(scales16, 0x44), scales_half[1] = _mm256_permute4x64_epi64(scales16, 0xEE);
        if constexpr (kThree) hbits = load256(x.hmask);
      }
      __m256i sum[C];
      for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i bits = load256(x.qs + 32 * h);
        if constexpr (!kScaledCodes) {
          for (int j = 0; j < 4; ++j) {
            __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m2);
            if constexpr (kThree) q = _mm256_or_si256(q, bit_of_bytes_at(hbits, 4 * h + j, 2));
            const __m256i s = _mm256_shuffle_epi8(scales_half[h], load256(kPairMask[j]));
            for (int c = 0; c < C; ++c) {
              sum[c] = _mm256_add_epi32(sum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(a[c][b].qs + 128 * h + 32 * j)), s));
            }
          }
        } else {
          for (int J = 0; J < 2; ++J) {  // groups 2J and 2J + 1, their codes in bits 0-1 and 2-3 of `at`
            const __m256i at = J == 0 ? bits : _mm256_srli_epi16(bits, 4);
            const __m256i q0 = _mm256_shuffle_epi8(tables.t[2 * h + J], _mm256_and_si256(at, m2));
            const __m256i q1 = _mm256_shuffle_epi8(tables.t[2 * h + J], _mm256_and_si256(at, _mm256_set1_epi8(0x0C)));
            for (int c = 0; c < C; ++c) {
              const int8_t* aq = a[c][b].qs + 128 * h + 64 * J;
              const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(q0, load256(aq)), _mm256_maddubs_epi16(q1, load256(aq + 32)));
              sum[c] = _mm256_add_epi32(sum[c], _mm256_madd_epi16(pairs, ones));
            }
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

// IQ4_XS codes are IQ4_NL's, signed: vpmaddubsw takes |a| and q * sign(a) (see Signs).
// One 32-byte load holds the codes of sub-blocks 2k and 2k + 1 (16 bytes each, low
// nibbles elements 0-15, high 16-31), so its low nibbles are elements 0-15 of sub-block 2k
// in the low 128-bit half and of 2k + 1 in the high half, its high nibbles elements 16-31
// of each. The activations are made once per call in that order (iq4_xs_activations), so
// the codes need no lane crossing: three operations unpack 64 codes. Each half's sub-block
// scale is applied while widening the pair sums.
struct DotIQ4XS {
  // More columns go in calls of four: with eight, the column sums and the unpacked codes
  // outgrew the registers (Zen 3, 768 x 2048 in cache: 8 tokens 25-27 GMAC/s in one
  // call, 29-34 in two).
  static constexpr int kMaxCols = 4;
  // Columns 0..C-1 of activations, each 64-element piece [0-15 32-47 16-31 48-63] as the
  // codes are unpacked: magnitudes |a| of column c at 2 * c * n, the codes at (2c + 1) * n.
  // Made once per call, for all of its rows, in a buffer of the calling thread's.
  static const uint8_t* iq4_xs_activations(int64_t n, const void* act, size_t stride, int n_cols) {
    thread_local std::vector<uint8_t> buffer;
    buffer.resize(static_cast<size_t>(2 * n * n_cols));
    for (int c = 0; c < n_cols; ++c) {
      const BlockQ8_K* a = act_col<BlockQ8_K>(act, stride, c);
      uint8_t* magnitudes = buffer.data() + 2 * c * n;
      uint8_t* codes = magnitudes + n;
      for (int64_t i = 0; i < n; i += 64) {
        const int8_t* q = a[i / 256].qs + i % 256;
        const __m256i first = load256(q), second = load256(q + 32);
        const __m256i low = _mm256_permute2x128_si256(first, second, 0x20), high = _mm256_permute2x128_si256(first, second, 0x31);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(magnitudes + i), _mm256_abs_epi8(low));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(magnitudes + i + 32), _mm256_abs_epi8(high));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + i), low);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + i + 32), high);
      }
    }
    return buffer.data();
  }
  // The eight sub-block scales (-32..31) as int16 lanes 0-7, in both halves:
  // (scales_l nibble s) | (bits 2s..2s+1 of scales_h) << 4, less 32.
  static __m256i scales16(const BlockIQ4_XS& x) {
    uint32_t low_bits;
    std::memcpy(&low_bits, x.scales_l, 4);
    const __m128i l = _mm_cvtsi32_si128(static_cast<int>(low_bits)), m4 = _mm_set1_epi8(0x0F);
    const __m128i low = _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_and_si128(l, m4), _mm_and_si128(_mm_srli_epi16(l, 4), m4)));
    // bits 2s..2s+1 of scales_h to the top of lane s, then down to 0..3
    const __m128i h = _mm_mullo_epi16(_mm_set1_epi16(static_cast<int16_t>(x.scales_h)), _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1));
    const __m128i s = _mm_sub_epi16(_mm_or_si128(low, _mm_slli_epi16(_mm_srli_epi16(h, 14), 4)), _mm_set1_epi16(32));
    return _mm256_broadcastsi128_si256(s);
  }
  template <int C>
  static void run(int64_t n, const void* w, const void* act, size_t stride, const uint8_t* prepared, float* out) {
    const auto* wb = static_cast<const BlockIQ4_XS*>(w);
    const BlockQ8_K* a[C];  // for the scales
    __m256 acc[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c), acc[c] = _mm256_setzero_ps();
    const __m256i table = broadcast128(kIQ4NLValues), m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / 256; ++b) {
      prefetch_ahead(wb + b);
      const BlockIQ4_XS& x = wb[b];
      const __m256i scales = scales16(x);
      __m256i sum[C];
      for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {  // sub-blocks 2k and 2k + 1
        const __m256i bytes = load256(x.qs + 32 * k);
        const __m256i low = _mm256_shuffle_epi8(table, _mm256_and_si256(bytes, m4));
        const __m256i high = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(bytes, 4), m4));
        const __m256i scale = _mm256_shuffle_epi8(scales, load256(kPairMask[k]));  // 2k low, 2k + 1 high
        for (int c = 0; c < C; ++c) {
          const uint8_t* m = prepared + 2 * c * n + 256 * b + 64 * k;
          const uint8_t* q = m + n;
          const __m256i p_low = _mm256_maddubs_epi16(load256(m), _mm256_sign_epi8(low, load256(q)));
          const __m256i p_high = _mm256_maddubs_epi16(load256(m + 32), _mm256_sign_epi8(high, load256(q + 32)));
          sum[c] = _mm256_add_epi32(sum[c], _mm256_add_epi32(_mm256_madd_epi16(p_low, scale), _mm256_madd_epi16(p_high, scale)));
        }
      }
      const float d = f16_to_f32(x.d);
      for (int c = 0; c < C; ++c) acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * a[c][b].d), _mm256_cvtepi32_ps(sum[c]), acc[c]);
    }
    for (int c = 0; c < C; ++c) out[c] = hsum(acc[c]);
  }

  template <int C>
  static void matmul(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
                     size_t out_stride) {
    each_row<DotIQ4XS, C>(n, w, row_bytes, n_rows, act, stride, out, out_stride, iq4_xs_activations(n, act, stride, C));
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
  // 32 BF16 weights from element i, lanes as Floats16's (dot_avx512.cpp): lane j of the
  // 16 holds elements 2j and 2j + 1, as floats.
  struct Pair {
    T even, odd;
  };
  static Pair load_bf16_pairs(const void* w, int64_t i) {
    const __m256i lo = load256(static_cast<const uint16_t*>(w) + i), hi = load256(static_cast<const uint16_t*>(w) + i + 16);
    const __m256i high_half = _mm256_set1_epi32(static_cast<int32_t>(0xffff0000u));
    return {{_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16))},
            {_mm256_castsi256_ps(_mm256_and_si256(lo, high_half)), _mm256_castsi256_ps(_mm256_and_si256(hi, high_half))}};
  }
  static T fmadd(T w, T a, T acc) { return {_mm256_fmadd_ps(w.low, a.low, acc.low), _mm256_fmadd_ps(w.high, a.high, acc.high)}; }
  static float sum(T acc) { return hsum(_mm256_add_ps(acc.low, acc.high)); }
};

KernelSet make_avx2() {
  KernelSet s{"avx2", {}, {}, {}, {}};
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
