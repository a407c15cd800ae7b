// AVX-512 dot kernels (F, BW, VL, DQ and VNNI) for the K formats Q2_K, Q3_K, Q4_K, Q5_K
// and Q6_K and IQ4_XS, the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4)
// and the float formats (F32, F16, BF16), in two sets (dot.h, Avx512Set). Both take the
// AVX2 kernel for Q8_K; Zen 4's also for Q6_K with one column in the file layout, where it
// streamed from memory faster than four rows at a time (the four-row kernel gives its bits).
//
// Q2_K, Q4_K, Q5_K and Q6_K take four rows per register, one per 128-bit lane, into
// vpdpbusd, and prompts sixteen rows per register, one per 32-bit lane (DotQ2KRows16,
// DotQ45KRows16, DotQ6KRows16), with the same bits: Q6_K the AVX2 kernel's, the others bits
// of their own (exact integers per row and block, then one float expression). The
// 32-element formats (Dot32Rows4) take four rows per register too, with bits of their own,
// the same for any rows and columns, from the file layout or the four-row layout
// (quant/rows4_layout.h). Q2_K-Q6_K weights in RAM are in the sixteen-row layout, which the
// sixteen-row kernels read without transposes, for every column count, decode included;
// the K formats' four-row kernels read the file layout (paged experts, the rows after the
// last group). Q3_K's file layout takes one row at a time for one column (DotQ3KRow:
// vpmaddubsw, then vpdpwssd with the sub-block scales), with the same bits. IQ4_XS takes
// four rows per register, from either layout, with bits of its own.
//
// Written with SIMDe's names (simde_mm512_*), which are the native intrinsics when this
// file is compiled for AVX-512 (CMakeLists.txt gives it the flags). The unit tests compile
// it a second time with EPQ_AVX512_EMULATED and without those flags, where SIMDe carries
// out each instruction with AVX2, so that a CPU without AVX-512 checks these kernels
// against the scalar reference too.
#include "util/avx512.h"  // first: SIMDe, and GCC 12's warnings off

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "quant/activation.h"
#include "quant/blocks.h"
#include "quant/dot.h"
#include "quant/float_bits.h"
#include "quant/kernel_common.h"
#include "quant/rows4_layout.h"
#include "util/avx2.h"

namespace epq::quant {
namespace {

using V512i = simde__m512i;
using V512 = simde__m512;

inline V512i load512(const void* p) { return simde_mm512_loadu_si512(p); }
// The same 32 bytes in both 256-bit halves.
inline V512i broadcast256(const void* p) { return simde_mm512_broadcast_i64x4(load256(p)); }
// int32 lanes to floats. SIMDe 0.7 lacks this one: two AVX2 halves there.
inline V512 to_float(V512i v) {
#if defined(__AVX512F__)
  return _mm512_cvtepi32_ps(v);
#else
  return join(_mm256_cvtepi32_ps(simde_mm512_castsi512_si256(v)), _mm256_cvtepi32_ps(simde_mm512_extracti64x4_epi64(v, 1)));
#endif
}
// 16 F16 values to floats. (SIMDe 0.7 lacks the 512-bit form: two AVX2 halves there.)
inline V512 halves_to_float(__m256i h) {
#if defined(__AVX512F__)
  return _mm512_cvtph_ps(h);
#else
  return join(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)));
#endif
}
// The 4 bytes at p in every 32-bit lane.
inline V512i broadcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return simde_mm512_set1_epi32(v);
}
// vpdpbusd and vpdpwssd against the 4 bytes at p in every 32-bit lane, as an embedded
// broadcast ({1to16}). GCC 12 does not fold a vpbroadcastd into these two. On a Zen 4,
// sixty-four vpdpbusd against eight columns' activations took 83 cycles with separate
// vpbroadcastd and 67-69 embedded, and the sixteen-row prompt kernels ran 5-7% faster
// (docs/PERFORMANCE.md, stop 56).
// dot_bytes: acc + the sums of four products of q's unsigned bytes and p's signed ones.
inline V512i dot_bytes(V512i acc, V512i q, const void* p) {
#if defined(__AVX512VNNI__)
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(q), "m"(*static_cast<const uint8_t(*)[4]>(p)));
  return acc;
#else
  return simde_mm512_dpbusd_epi32(acc, q, broadcast32(p));
#endif
}
// dot_pairs: acc + the sums of two products of v's int16 pairs and p's.
inline V512i dot_pairs(V512i acc, V512i v, const void* p) {
#if defined(__AVX512VNNI__)
  __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(v), "m"(*static_cast<const uint8_t(*)[4]>(p)));
  return acc;
#else
  return simde_mm512_dpwssd_epi32(acc, v, broadcast32(p));
#endif
}
inline float hsum512(V512 v) { return hsum(_mm256_add_ps(low_half(v), high_half(v))); }
// A 256-bit vector in the low half, zeros above.
inline V512i widen(__m256i v) { return simde_mm512_inserti64x4(simde_mm512_setzero_si512(), v, 0); }

// Index vectors for vpermw: for Q3_K's chunk k of 64 elements (sub-blocks of 16), 16-bit
// lane i selects scale 4k + i / 8.
inline V512i scale_index(int k) {
  alignas(64) int16_t index[32];
  for (int i = 0; i < 32; ++i) index[i] = static_cast<int16_t>(4 * k + i / 8);
  return load512(index);
}

// ---- Four rows per register, one per 128-bit lane ----
// A lane's 16 bytes are 16 consecutive codes of its row, so that one vpdpbusd takes 16
// codes of each of four rows against the same 16 activations, broadcast to every lane.

// 32 bytes at offset `at` of each row's block b: bytes 0-15 of row i in 128-bit lane i of
// `first`, bytes 16-31 in `second`'s.
struct RowHalves {
  V512i first, second;
};
// 16 bytes at p in every 128-bit lane.
inline V512i broadcast128(const void* p) { return simde_mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
// Float i of f in lanes 4i..4i+3.
// (The index is a table: SIMDe's set_epi32 compiles to sixteen masked broadcasts.)
alignas(64) constexpr int32_t kSpread4[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
inline V512 spread4(__m128 f) { return simde_mm512_permutexvar_ps(load512(kSpread4), simde_mm512_castps128_ps512(f)); }
// The 32-bit lanes of each 128-bit lane of v in the order kImm gives (as vpshufd does;
// SIMDe 0.7 lacks its 512-bit form).
template <int kImm>
inline V512i shuffle32(V512i v) {
  return simde_mm512_castps_si512(simde_mm512_shuffle_ps(simde_mm512_castsi512_ps(v), simde_mm512_castsi512_ps(v), kImm));
}
// Each row's four lanes added as (l0 + l1) + (l2 + l3), into lane 4i.
inline V512 add_row_lanes(V512 v) {
  const V512 pairs = simde_mm512_add_ps(v, simde_mm512_shuffle_ps(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  return simde_mm512_add_ps(pairs, simde_mm512_shuffle_ps(pairs, pairs, _MM_SHUFFLE(1, 0, 3, 2)));
}
// Lane 4i of each column's vector to out[c * out_stride + i], for rows i < `rows`.
template <int C>
inline void store_rows4(const V512 (&v)[C], float* out, size_t out_stride, int rows = 4) {
  for (int c = 0; c < C; ++c) {
    alignas(16) float row[4];
    _mm_store_ps(row, simde_mm512_castps512_ps128(simde_mm512_maskz_compress_ps(0x1111, v[c])));
    std::memcpy(out + static_cast<size_t>(c) * out_stride, row, sizeof(float) * static_cast<size_t>(rows));
  }
}

// G groups' sums to their rows: each row's lanes added as (l0 + l1) + (l2 + l3), the last
// group's first `last_rows` rows stored.
template <int G, int C>
inline void store_groups(V512 (&acc)[G][C], float* out, size_t out_stride, int last_rows = 4) {
  for (int rg = 0; rg < G; ++rg) {
    for (int c = 0; c < C; ++c) acc[rg][c] = add_row_lanes(acc[rg][c]);
    store_rows4(acc[rg], out + 4 * rg, out_stride, rg == G - 1 ? last_rows : 4);
  }
}

// The cache line at p into L2 (prefetcht1), as an asm statement GCC keeps: it dropped
// _mm_prefetch from the sixteen-row kernels' code, which then read DRAM at half speed.
inline void prefetch_into_l2(const void* p) { __asm__ volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p))); }

// ---- Block b's fields of four rows ----
// In the file layout (FileRows4: four row pointers) or in the four-row layout
// (PackedRows4: a group, quant/rows4_layout.h). `at` is the field's offset in the block.
template <typename Block>
struct FileRows4 {
  const Block* x[4];
  // Row i's copy of the field.
  const uint8_t* row_field(int64_t b, size_t at, int i) const { return reinterpret_cast<const uint8_t*>(x[i] + b) + at; }
  // A 16-byte field (or the 4-byte one at its start), row i's in 128-bit lane i.
  V512i field16(int64_t b, size_t at) const {
    auto part = [&](int i) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row_field(b, at, i))); };
    const __m256i rows01 = _mm256_inserti128_si256(_mm256_castsi128_si256(part(0)), part(1), 1);
    const __m256i rows23 = _mm256_inserti128_si256(_mm256_castsi128_si256(part(2)), part(3), 1);
    return simde_mm512_inserti64x4(simde_mm512_castsi256_si512(rows01), rows23, 1);
  }
  V512i field4(int64_t b, size_t at) const { return field16(b, at); }
  // A 32-byte field: bytes 0-15 of row i in lane i of `first`, 16-31 in `second`'s.
  RowHalves field32(int64_t b, size_t at) const {
    auto part = [&](int i) { return load256(row_field(b, at, i)); };
    const V512i rows01 = simde_mm512_inserti64x4(simde_mm512_castsi256_si512(part(0)), part(1), 1);
    const V512i rows23 = simde_mm512_inserti64x4(simde_mm512_castsi256_si512(part(2)), part(3), 1);
    return {simde_mm512_shuffle_i64x2(rows01, rows23, _MM_SHUFFLE(2, 0, 2, 0)), simde_mm512_shuffle_i64x2(rows01, rows23, _MM_SHUFFLE(3, 1, 3, 1))};
  }
  // An F16 field as floats, row i's in lanes 4i..4i+3.
  V512 f16(int64_t b, size_t at) const { return spread4(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(halves(b, at))))); }
  // A 2-byte field of the four rows, row i's in bits 16i..16i+15.
  uint64_t halves(int64_t b, size_t at) const {
    uint64_t h = 0;
    for (int i = 0; i < 4; ++i) {
      uint16_t v;
      std::memcpy(&v, row_field(b, at, i), 2);
      h |= uint64_t{v} << (16 * i);
    }
    return h;
  }
  // A byte field, row i's in 32-bit lane i.
  __m128i byte(int64_t b, size_t at) const {
    auto at_row = [&](int i) { return *row_field(b, at, i); };
    return _mm_setr_epi32(at_row(0), at_row(1), at_row(2), at_row(3));
  }
  // The cache lines kPrefetchBytes beyond block b of each of the four rows (see
  // prefetch_ahead_in_group; `rows_in_call` rows share the stream), into L2: four rows'
  // lines that far ahead in L1 would push out the lines being read. For a block smaller
  // than a line, only where a line starts in it.
  void prefetch(int64_t b, size_t row_bytes, int rows_in_call) const {
    const size_t at = static_cast<size_t>(b) * sizeof(Block);
    if (sizeof(Block) < 64 && at % 64 >= sizeof(Block)) return;
    for (int i = 0; i < 4; ++i) {
      for (size_t line = 0; line < sizeof(Block); line += 64) {
        prefetch_into_l2(ahead_in_group(reinterpret_cast<const uint8_t*>(x[i]), at + line, row_bytes, rows_in_call));
      }
    }
  }
};
template <typename Block>
struct PackedRows4 {
  const uint8_t* group;
  const uint8_t* field(int64_t b, size_t at) const { return group + static_cast<size_t>(b) * 4 * sizeof(Block) + 4 * at; }
  V512i field16(int64_t b, size_t at) const { return load512(field(b, at)); }
  V512i field4(int64_t b, size_t at) const {
    return simde_mm512_permutexvar_epi32(load512(kSpread4), simde_mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(field(b, at)))));
  }
  // Rows 0-1's 32 bytes in the first load, rows 2-3's in the second; their 128-bit lanes
  // picked so that row i's halves are lane i of `first` and of `second`.
  RowHalves field32(int64_t b, size_t at) const {
    const V512i r01 = load512(field(b, at)), r23 = load512(field(b, at) + 64);
    return {simde_mm512_shuffle_i64x2(r01, r23, _MM_SHUFFLE(2, 0, 2, 0)), simde_mm512_shuffle_i64x2(r01, r23, _MM_SHUFFLE(3, 1, 3, 1))};
  }
  V512 f16(int64_t b, size_t at) const { return spread4(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(field(b, at))))); }
  __m128i byte(int64_t b, size_t at) const {
    uint32_t four;
    std::memcpy(&four, field(b, at), 4);
    return _mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(four)));
  }
  // One stream: the lines kPrefetchBytes ahead of those that start in this block index.
  void prefetch(int64_t b, size_t, int) const {
    const uintptr_t from = reinterpret_cast<uintptr_t>(field(b, 0)) + kPrefetchBytes, to = from + 4 * sizeof(Block);
    for (uintptr_t line = (from + 63) & ~uintptr_t{63}; line < to; line += 64) prefetch_into_l2(reinterpret_cast<const void*>(line));
  }
};

// ---- 32-element formats, four rows per register ----
// A format gives block b of each of four rows as 32 unsigned codes, elements 0-15 of row
// i in lane i of `first` and 16-31 in `second`'s, and its F16 factors as floats in lanes
// 4i..4i+3 (row_f16s): x = d * (code - kBias) + m (m = 0 without kMin). Unsigned codes go
// straight into vpdpbusd, and the bias comes off exactly, as the sum starts from -kBias x
// the activations of its lane. Signed codes (Q8_0, IQ4_NL, MXFP4) are stored +128 for that.

// A 16-entry code book as unsigned bytes, for vpshufb.
struct CodeBook16 {
  uint8_t v[16];
};
// A signed code book stored +128.
constexpr CodeBook16 biased(const int8_t (&values)[16]) {
  CodeBook16 t{};
  for (int i = 0; i < 16; ++i) t.v[i] = static_cast<uint8_t>(values[i] + 128);
  return t;
}
constexpr CodeBook16 kIQ4NLBiased = biased(kIQ4NLValues), kMXFP4Biased = biased(kMXFP4Values);

// Nibble pairs (low = element j, high = element j + 16) of the 16 bytes at p (lanes 0-1)
// and at q (lanes 2-3), in element order: 64 codes.
inline V512i nibble_codes(const uint8_t* p, const uint8_t* q) {
  const __m256i lanes_p = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i lanes_q = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
  const V512i x = simde_mm512_inserti64x4(simde_mm512_castsi256_si512(lanes_p), lanes_q, 1);  // [p p q q]
  alignas(64) static constexpr uint32_t kShift[16] = {0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4};  // a table: see spread4
  return simde_mm512_and_si512(simde_mm512_srlv_epi32(x, load512(kShift)), simde_mm512_set1_epi8(0x0F));  // bits shifted in from the next byte are masked off
}
// Codes 0-15 through a 16-entry table (the same in every 128-bit lane).
inline V512i lookup_codes(const uint8_t* table, V512i idx) { return simde_mm512_shuffle_epi8(broadcast128(table), idx); }

// Q5_0/Q5_1 fifth bits (NibbleFormat::codes): byte j of a lane reads qh byte j / 8 (low
// half) or 2 + j / 8 (high half), and tests its bit j % 8.
alignas(16) constexpr uint8_t kFifthBitBytes[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}};
alignas(16) constexpr uint8_t kFifthBitMasks[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};

// The nibble formats: 16 bytes of nibble pairs per block (qs: low nibble element j, high
// j + 16), a fifth bit per element where the block has qh (bit j for element j), F16 d
// (and m, with kMin) at byte 0, and a code book where the block has one.
template <typename B, int kBiasCodes, bool kWithMin, const CodeBook16* kBook = nullptr>
struct NibbleFormat {
  using Block = B;
  static constexpr int kBias = kBiasCodes;
  static constexpr bool kMin = kWithMin;
  template <typename Rows>
  static RowHalves codes(const Rows& x, int64_t b) {
    const V512i m4 = simde_mm512_set1_epi8(0x0F);
    const V512i packed = x.field16(b, offsetof(Block, qs));
    RowHalves q{simde_mm512_and_si512(packed, m4), simde_mm512_and_si512(simde_mm512_srli_epi16(packed, 4), m4)};
    if constexpr (requires { B::qh; }) {
      // Row i's qh in bytes 0-3 of lane i; byte j of each lane tests bit j (low: of qh
      // bytes 0-1, elements 0-15) or bit 16 + j (high: bytes 2-3, elements 16-31).
      const V512i qh = x.field4(b, offsetof(Block, qh));
      const V512i low_bytes = broadcast128(kFifthBitBytes[0]), high_bytes = broadcast128(kFifthBitBytes[1]);
      const V512i bit = broadcast128(kFifthBitMasks);
      const simde__mmask64 low = simde_mm512_test_epi8_mask(simde_mm512_shuffle_epi8(qh, low_bytes), bit);
      const simde__mmask64 high = simde_mm512_test_epi8_mask(simde_mm512_shuffle_epi8(qh, high_bytes), bit);
      const V512i fifth = simde_mm512_set1_epi8(0x10);
      q = {simde_mm512_mask_add_epi8(q.first, low, q.first, fifth), simde_mm512_mask_add_epi8(q.second, high, q.second, fifth)};
    }
    if constexpr (kBook != nullptr) {
      q = {lookup_codes(kBook->v, q.first), lookup_codes(kBook->v, q.second)};
    }
    return q;
  }
  template <typename Rows>
  static V512 scales(const Rows& x, int64_t b) { return x.f16(b, offsetof(Block, d)); }
  template <typename Rows>  // with kMin only
  static V512 mins(const Rows& x, int64_t b) { return x.f16(b, offsetof(Block, m)); }
};
using Rows4Q4_0 = NibbleFormat<BlockQ4_0, 8, false>;
using Rows4Q4_1 = NibbleFormat<BlockQ4_1, 0, true>;
using Rows4Q5_0 = NibbleFormat<BlockQ5_0, 16, false>;
using Rows4Q5_1 = NibbleFormat<BlockQ5_1, 0, true>;
using Rows4IQ4_NL = NibbleFormat<BlockIQ4_NL, 128, false, &kIQ4NLBiased>;
struct Rows4MXFP4 : NibbleFormat<BlockMXFP4, 128, false, &kMXFP4Biased> {
  // e8m0_to_f32_half of the four rows' exponents, in vector code: (e - 1) << 23, or
  // 0x00200000 << e for e < 2.
  template <typename Rows>
  static V512 scales(const Rows& x, int64_t b) {
    const __m128i e = x.byte(b, offsetof(Block, e));
    const __m128i normal = _mm_slli_epi32(_mm_sub_epi32(e, _mm_set1_epi32(1)), 23);
    const __m128i tiny = _mm_sllv_epi32(_mm_set1_epi32(0x00200000), e);
    return spread4(_mm_castsi128_ps(_mm_blendv_epi8(normal, tiny, _mm_cmplt_epi32(e, _mm_set1_epi32(2)))));
  }
};
struct Rows4Q8_0 {
  using Block = BlockQ8_0;
  static constexpr int kBias = 128;
  static constexpr bool kMin = false;
  template <typename Rows>
  static RowHalves codes(const Rows& x, int64_t b) {
    const RowHalves q = x.field32(b, offsetof(Block, qs));
    const V512i flip = simde_mm512_set1_epi8(static_cast<char>(0x80));
    return {simde_mm512_xor_si512(q.first, flip), simde_mm512_xor_si512(q.second, flip)};
  }
  template <typename Rows>
  static V512 scales(const Rows& x, int64_t b) { return x.f16(b, offsetof(Block, d)); }
};

// Rows in groups of four against up to eight columns, a block at a time. Per row, column
// and block, 32-bit lane l sums the products of elements 4l..4l+3 and 16+4l..16+4l+3, an
// exact integer sumi, and
//   acc += float(sumi) * (d * a.d)   (and with kMin, in lane 0 only, acc += m * a.s);
// the row's result is (l0 + l1) + (l2 + l3) of acc. Each lane's start, -kBias x the sum
// of its eight activations, is prepared once per call for a window of blocks, and every
// row of the call reads it there; the rows' sums wait in memory between windows, so each
// lane adds its terms in the same order. A group short of four rows repeats its last row.
// So a row's bits depend on neither its partners nor the column count, one column
// (decode) included. With one column a call streams two groups side by side (8 rows), which
// share each block's activation loads: from DRAM, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4
// ran at 43-60% of the read probe one group at a time, at 52-66% two at a time
// (docs/PERFORMANCE.md, stop 43). With kPacked the rows' groups are in the four-row layout
// (quant/rows4_layout.h), the rows after the last group in the file's; a call reads one
// group at a time, one stream: 68-86% of the probe (two groups, two streams, were slower).
template <typename F, bool kPacked = false>
struct Dot32Rows4 {
  using Block = typename F::Block;
  static constexpr int64_t kTileRows = 32;
  static constexpr int kOneColumnGroups = 2;  // groups of four rows side by side with one column
  static constexpr size_t kWindowBytes = 32 << 10;  // prepared starts: 2048 blocks of one column, 256 of eight

  static __m128i lane_start(const BlockQ8x32& a) {
    const __m128i ones8 = _mm_set1_epi8(1), ones16 = _mm_set1_epi16(1);
    const __m128i low = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs)), high = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs + 16));
    const __m128i sums = _mm_madd_epi16(_mm_add_epi16(_mm_maddubs_epi16(ones8, low), _mm_maddubs_epi16(ones8, high)), ones16);
    return _mm_mullo_epi32(sums, _mm_set1_epi32(-F::kBias));
  }

  // acc[g][c] += group g's rows x column c over blocks [b0, b1), starts[b - b0][c]
  // prepared. The G groups of a call share each block's activation loads.
  template <int C, int G, typename Rows>
  static void span(const Rows (&x)[G], size_t row_bytes, const BlockQ8x32* const (&a)[C], int64_t b0, int64_t b1,
                   const __m128i (*starts)[C], V512 (*acc)[C]) {
    for (int64_t b = b0; b < b1; ++b) {
      for (int g = 0; g < G; ++g) {
        x[g].prefetch(b, row_bytes, 4 * G);
        const RowHalves q = F::codes(x[g], b);
        const V512 d = F::scales(x[g], b);
        V512 m = simde_mm512_setzero_ps();
        if constexpr (F::kMin) m = simde_mm512_maskz_mov_ps(0x1111, F::mins(x[g], b));
        for (int c = 0; c < C; ++c) {
          const BlockQ8x32& ab = a[c][b];
          const V512i sumi = simde_mm512_dpbusd_epi32(simde_mm512_dpbusd_epi32(simde_mm512_broadcast_i32x4(starts[b - b0][c]), q.first,
                                                                               broadcast128(ab.qs)),
                                                      q.second, broadcast128(ab.qs + 16));
          acc[g][c] = simde_mm512_fmadd_ps(to_float(sumi), simde_mm512_mul_ps(d, simde_mm512_set1_ps(ab.d)), acc[g][c]);
          if constexpr (F::kMin) acc[g][c] = simde_mm512_fmadd_ps(m, simde_mm512_set1_ps(ab.s), acc[g][c]);
        }
      }
    }
  }

  template <int C>
  static void matmul(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
                     size_t out_stride) {
    const int64_t n_blocks = n / 32;
    const BlockQ8x32* a[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8x32>(act, stride, c);
    constexpr int64_t kWindowBlocks = static_cast<int64_t>(kWindowBytes / (C * sizeof(__m128i)));
    __m128i starts[kWindowBlocks][C];
    int64_t prepared = -1;  // the window in `starts`: a row that fits one is prepared once per call
    V512 sums[kTileRows / 4][C];
    for (int64_t r0 = 0; r0 < n_rows; r0 += kTileRows) {
      const int64_t rows = std::min(kTileRows, n_rows - r0), groups = (rows + 3) / 4;
      for (int64_t g = 0; g < groups; ++g) {
        for (int c = 0; c < C; ++c) sums[g][c] = simde_mm512_setzero_ps();
      }
      for (int64_t b0 = 0; b0 < n_blocks; b0 += kWindowBlocks) {
        const int64_t b1 = std::min(n_blocks, b0 + kWindowBlocks);
        if (prepared != b0) {
          for (int64_t b = b0; b < b1; ++b) {
            for (int c = 0; c < C; ++c) starts[b - b0][c] = lane_start(a[c][b]);
          }
          prepared = b0;
        }
        int64_t g = 0;
        auto calls = [&]<int G>(std::integral_constant<int, G>) {
          for (; g + G <= groups; g += G) {
            FileRows4<Block> x[G];
            for (int i = 0; i < 4 * G; ++i) {
              x[i / 4].x[i % 4] = reinterpret_cast<const Block*>(w + static_cast<size_t>(r0 + std::min(4 * g + i, rows - 1)) * row_bytes);
            }
            span<C, G>(x, row_bytes, a, b0, b1, starts, sums + g);
          }
        };
        if constexpr (kPacked) {
          // One group at a time, so that a call reads one stream.
          for (; g < rows / 4; ++g) {
            const PackedRows4<Block> x[1] = {{w + static_cast<size_t>(r0 + 4 * g) * row_bytes}};
            span<C, 1>(x, row_bytes, a, b0, b1, starts, sums + g);
          }
        } else if constexpr (C == 1) {
          calls(std::integral_constant<int, kOneColumnGroups>{});
        }
        calls(std::integral_constant<int, 1>{});  // the rest, and with kPacked the rows after the groups
      }
      for (int64_t g = 0; g < groups; ++g) {
        for (int c = 0; c < C; ++c) sums[g][c] = add_row_lanes(sums[g][c]);
        store_rows4(sums[g], out + r0 + 4 * g, out_stride, static_cast<int>(std::min<int64_t>(4, rows - 4 * g)));
      }
    }
  }
};

// 32-bit lanes: `low` in lanes 0-7 and `high` in lanes 8-15.
inline V512i halves32(int low, int high) {
  return simde_mm512_inserti64x4(simde_mm512_castsi256_si512(_mm256_set1_epi32(low)), _mm256_set1_epi32(high), 1);
}
// Bytes: `low` in bytes 0-31 and `high` in bytes 32-63.
inline V512i halves8(int low, int high) {
  return simde_mm512_inserti64x4(simde_mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(low))), _mm256_set1_epi8(static_cast<char>(high)), 1);
}

// The sums of x's and of y's sixteen 32-bit lanes (exact integers: any order gives them),
// as floats: x's in lanes 0-1, y's in lanes 2-3.
inline __m128 lane_totals(V512i x, V512i y) {
  auto eight = [](V512i v) { return _mm256_add_epi32(simde_mm512_castsi512_si256(v), simde_mm512_extracti64x4_epi64(v, 1)); };
  const __m256i a = eight(x), b = eight(y);
  const __m256i four = _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));  // x x y y in each half
  const __m128i two = _mm_add_epi32(_mm256_castsi256_si128(four), _mm256_extracti128_si256(four, 1));
  return _mm_cvtepi32_ps(_mm_add_epi32(two, _mm_shuffle_epi32(two, _MM_SHUFFLE(2, 3, 0, 1))));
}

// Q3_K, one row at a time: element h*128 + 32j + l is bits 2j..2j+1 of qs[32h + l], plus
// 4 x bit 4h + j of hmask[l] (codes stored +4); sub-blocks of 16 elements. The four-row
// form of DotQ2KRows4 ran slower for Q3_K (docs/PERFORMANCE.md, stop 47).
// This row-at-a-time kernel is inlined into each_row's loop, so that its constant vectors
// are set up once per call, not once per row: a row of 768 columns is three blocks, and
// the setup weighed (docs/PERFORMANCE.md, stop 43).
struct DotQ3KRow {
  using Block = BlockQ3_K;

  // Per column and block: the row's exact integer total of scale . codes . a, the offset
  // 4 * scale . bsums taken off through vpdpwssd with -4 * scale, then acc = fma(total,
  // d x a.d, acc): the bits of DotQ3KRows16, which holds the total in one lane. Blocks go
  // in pairs, whose lanes are added together (lane_totals).
  template <int C>
  [[gnu::always_inline]] static inline void run(int64_t n, const void* w, const void* act, size_t stride, float* out) {
    const auto* wb = static_cast<const Block*>(w);
    const BlockQ8_K* a[C];
    float acc[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c), acc[c] = 0;
    V512i index[4], shift[2], third_bit[4];
    for (int k = 0; k < 4; ++k) index[k] = scale_index(k);
    for (int p = 0; p < 2; ++p) shift[p] = halves32(4 * p, 4 * p + 2);
    // Chunk (h, p)'s third bits: hmask bit 4h + 2p in the first 32 bytes, 4h + 2p + 1 in the next.
    for (int k = 0; k < 4; ++k) third_bit[k] = halves8(1 << (2 * k), 1 << (2 * k + 1));
    const V512i m2 = simde_mm512_set1_epi8(3), four = simde_mm512_set1_epi8(4);
    // Block b's integer sums per column, in 16 lanes.
    auto block_sums = [&](int64_t b, V512i (&sum)[C]) {
      prefetch_ahead(wb + b);
      const Block& x = wb[b];
      const __m256i scales16 = _mm256_cvtepi8_epi16(q3_k_scales(x.scales));
      const V512i scales = simde_mm512_castsi256_si512(scales16);  // lanes 0-15; vpermw reads no others
      const V512i high_bits = broadcast256(x.hmask), minus4_scales = widen(_mm256_mullo_epi16(scales16, _mm256_set1_epi16(-4)));
      for (int c = 0; c < C; ++c) sum[c] = simde_mm512_dpwssd_epi32(simde_mm512_setzero_si512(), minus4_scales, widen(load256(a[c][b].bsums)));
      for (int h = 0; h < 2; ++h) {
        const V512i bits = broadcast256(x.qs + 32 * h);
        for (int p = 0; p < 2; ++p) {
          // Elements h*128 + 64p + [0, 64): j = 2p for the first 32, 2p + 1 for the next.
          V512i q = simde_mm512_and_si512(simde_mm512_srlv_epi32(bits, shift[p]), m2);
          q = simde_mm512_mask_add_epi8(q, simde_mm512_test_epi8_mask(high_bits, third_bit[2 * h + p]), q, four);
          const V512i s = simde_mm512_permutexvar_epi16(index[2 * h + p], scales);
          for (int c = 0; c < C; ++c) {
            sum[c] = simde_mm512_dpwssd_epi32(sum[c], simde_mm512_maddubs_epi16(q, load512(a[c][b].qs + 128 * h + 64 * p)), s);
          }
        }
      }
    };
    auto add = [&](int c, int64_t b, float total) { acc[c] = std::fma(total, f16_to_f32(wb[b].d) * a[c][b].d, acc[c]); };
    const int64_t blocks = n / 256;
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
      V512i first[C], second[C];
      block_sums(b, first);
      block_sums(b + 1, second);
      for (int c = 0; c < C; ++c) {
        const __m128 totals = lane_totals(first[c], second[c]);
        add(c, b, _mm_cvtss_f32(totals));
        add(c, b + 1, _mm_cvtss_f32(_mm_movehl_ps(totals, totals)));
      }
    }
    if (b < blocks) {
      V512i last[C];
      block_sums(b, last);
      for (int c = 0; c < C; ++c) add(c, b, _mm_cvtss_f32(lane_totals(last[c], last[c])));
    }
    for (int c = 0; c < C; ++c) out[c] = acc[c];
  }
};

// One 16-element sub-block of each of four rows per register (codes unsigned, in q[rg]),
// against the 16 activations at element `at` of each column's block b: per 32-bit lane,
// the sum of four products (|sum| < 2^15), times the lane's (scale, 0) 16-bit pair in
// scale[rg], added to sum[rg][c]. The G groups share each activation broadcast.
template <int C, int G>
inline void add_scaled_subblock(V512i (&sum)[G][C], const V512i (&q)[G], const V512i (&scale)[G], const BlockQ8_K* const (&a)[C],
                                int64_t b, int at) {
  for (int c = 0; c < C; ++c) {
    const V512i act16 = broadcast128(a[c][b].qs + at);
    for (int rg = 0; rg < G; ++rg) {
      const V512i part = simde_mm512_dpbusd_epi32(simde_mm512_setzero_si512(), q[rg], act16);
      sum[rg][c] = simde_mm512_dpwssd_epi32(sum[rg][c], part, scale[rg]);
    }
  }
}

// acc + a_d x (d x float(sum) - dmin x float(min_sum)), per 32-bit lane: a K format's
// block b with mins, its integers exact, in one column.
inline V512 add_block(V512 acc, V512i sum, V512i min_sum, V512 d, V512 dmin, float a_d) {
  const V512 block = simde_mm512_fnmadd_ps(dmin, to_float(min_sum), simde_mm512_mul_ps(d, to_float(sum)));
  return simde_mm512_fmadd_ps(simde_mm512_set1_ps(a_d), block, acc);
}

// Each row's four 32-bit lanes added, the total in all four (an exact integer sum: any
// order gives it).
inline V512i row_totals(V512i v) {
  const V512i pairs = simde_mm512_add_epi32(v, shuffle32<_MM_SHUFFLE(2, 3, 0, 1)>(v));
  return simde_mm512_add_epi32(pairs, shuffle32<_MM_SHUFFLE(1, 0, 3, 2)>(pairs));
}

// The end of block b for the K formats with mins in four-row kernels, per column c: min_sum
// is the activations' 16-element sums (bsums) 0-7 times each lane's 16-bit mins_low, plus
// bsums 8-15 times mins_high, an exact integer. sum and min_sum are first added over each
// row's lanes, so that the float operations (add_block's) act on the row's block integers,
// as the sixteen-row kernels' do on each lane's.
template <int C>
inline void add_block_with_mins(V512 (&acc)[C], const V512i (&sum)[C], V512 d, V512 dmin, V512i mins_low, V512i mins_high,
                                const BlockQ8_K* const (&a)[C], int64_t b) {
  for (int c = 0; c < C; ++c) {
    const V512i min_sum = simde_mm512_dpwssd_epi32(simde_mm512_madd_epi16(mins_low, broadcast128(a[c][b].bsums)), mins_high,
                                                   broadcast128(a[c][b].bsums + 8));
    // Per row: lanes (s0 + s2, m0 + m2, s1 + s3, m1 + m3), then (S, M, S, M).
    const V512i halves = simde_mm512_add_epi32(simde_mm512_unpacklo_epi32(sum[c], min_sum), simde_mm512_unpackhi_epi32(sum[c], min_sum));
    const V512 totals = to_float(simde_mm512_add_epi32(halves, shuffle32<_MM_SHUFFLE(1, 0, 3, 2)>(halves)));
    // add_block's operations in each row's first lane, M brought beside S.
    const V512 block = simde_mm512_fnmadd_ps(dmin, simde_mm512_shuffle_ps(totals, totals, _MM_SHUFFLE(3, 3, 1, 1)), simde_mm512_mul_ps(d, totals));
    acc[c] = simde_mm512_fmadd_ps(simde_mm512_set1_ps(a[c][b].d), block, acc[c]);
  }
}

// Every row of a run for a four-row kernel K that takes any row count itself (Q2_K,
// IQ4_XS): K::group<C, G>(n, x, row_bytes, a, out, out_stride, last_rows) takes G groups
// of four rows side by side, the last of them holding `last_rows` real rows and repeating
// its last one after them. With K::kPacked the complete groups are in the four-row layout,
// G = K::kGroups<C> at a time, then one at a time; the rows after them are in the file's.
template <typename K, int C>
void every_row_in_groups(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
                         size_t out_stride) {
  using Block = typename K::Block;
  const BlockQ8_K* a[C];
  for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c);
  constexpr int G = K::template kGroups<C>;
  int64_t r = 0;
  if constexpr (K::kPacked) {
    auto calls = [&]<int H>(std::integral_constant<int, H>) {
      for (; r + 4 * H <= n_rows; r += 4 * H) {
        PackedRows4<Block> x[H];
        for (int g = 0; g < H; ++g) x[g].group = w + static_cast<size_t>(r + 4 * g) * row_bytes;
        K::template group<C, H>(n, x, row_bytes, a, out + r, out_stride, 4);
      }
    };
    calls(std::integral_constant<int, G>{});
    if constexpr (G > 1) calls(std::integral_constant<int, 1>{});
  }
  // In the file layout: calls of H groups up to row `end`; past n_rows, the last row again.
  auto file_calls = [&]<int H>(std::integral_constant<int, H>, int64_t end) {
    for (; r < end; r += 4 * H) {
      FileRows4<Block> x[H];
      for (int i = 0; i < 4 * H; ++i) x[i / 4].x[i % 4] = reinterpret_cast<const Block*>(w + static_cast<size_t>(std::min(r + i, n_rows - 1)) * row_bytes);
      K::template group<C, H>(n, x, row_bytes, a, out + r, out_stride, static_cast<int>(std::min<int64_t>(4, n_rows - r - 4 * (H - 1))));
    }
  };
  file_calls(std::integral_constant<int, G>{}, n_rows / (4 * G) * (4 * G));
  file_calls(std::integral_constant<int, 1>{}, n_rows);
}

// The matmul of a four-row kernel K that takes any row count itself: every_row_in_groups.
template <typename K>
struct InGroupsOfFour {
  template <int C>
  static void matmul(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
                     size_t out_stride) {
    every_row_in_groups<K, C>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
  }
};

// Q2_K with four rows per register: each 128-bit lane holds the 16 codes (0-3) of one
// sub-block of its row, as in DotQ6KRows4. Element h*128 + 32j + l is bits 2j..2j+1 of
// qs[32h + l], so sub-block 8h + 2j + half is qs[32h + 16 half, +16) shifted right 2j. One
// vpdpbusd takes it against 16 broadcast activations (|4 products| <= 4 x 3 x 128), and
// one vpdpwssd multiplies each 32-bit lane by the sub-block's scale, as a (scale, 0) 16-bit
// pair, and adds it: sum. The offset is min_sum = sum_k(min_k x bsums_k), bsums_k the
// activations' sum over sub-block k, another exact integer per lane. Both are then added
// over each row's lanes, and per row and column acc += a.d x (d x float(sum) - dmin x
// float(min_sum)), as DotQ45KRows4 does: the bits of DotQ2KRows16, and the same for any
// rows beside a row and any column count (a group short of four rows repeats its last
// row; every call takes kGroups groups side by side, then single groups). Against the
// one-row kernel this replaced: 1.23x with rows in cache and one column, 1.04-1.08x for
// prompts; from DRAM, and in decode end to end, level within the noise (docs/PERFORMANCE.md,
// stop 47). The rows are in the file layout.
struct DotQ2KRows4 : InGroupsOfFour<DotQ2KRows4> {
  using Block = BlockQ2_K;
  static constexpr bool kPacked = false;
  template <int C>
  static constexpr int kGroups = 2;  // groups of four rows per call, for any column count

  template <int C, int G, typename Rows>
  static void group(int64_t n, const Rows (&x)[G], size_t row_bytes, const BlockQ8_K* const (&a)[C], float* out, size_t out_stride,
                    int last_rows) {
    V512 acc[G][C];
    for (int rg = 0; rg < G; ++rg)
      for (int c = 0; c < C; ++c) acc[rg][c] = simde_mm512_setzero_ps();
    const V512i m3 = simde_mm512_set1_epi8(3), m4 = simde_mm512_set1_epi8(0x0F), zero = simde_mm512_setzero_si512();
    for (int64_t b = 0; b < n / 256; ++b) {
      V512i scales_mins[G], scales[G], sum[G][C];
      for (int rg = 0; rg < G; ++rg) {
        x[rg].prefetch(b, row_bytes, 4 * G);
        scales_mins[rg] = x[rg].field16(b, offsetof(Block, scales));  // row i's in lane i: scale k low nibble of byte k, min high
        scales[rg] = simde_mm512_and_si512(scales_mins[rg], m4);
        for (int c = 0; c < C; ++c) sum[rg][c] = simde_mm512_setzero_si512();
      }
      for (int h = 0; h < 2; ++h) {
        RowHalves qs[G];
        for (int rg = 0; rg < G; ++rg) qs[rg] = x[rg].field32(b, offsetof(Block, qs) + 32 * h);
        for (int j = 0; j < 4; ++j) {
          for (int half = 0; half < 2; ++half) {
            const int k = 8 * h + 2 * j + half;
            V512i q[G], scale[G];
            for (int rg = 0; rg < G; ++rg) {
              const V512i bits = half == 0 ? qs[rg].first : qs[rg].second;
              q[rg] = simde_mm512_and_si512(j == 0 ? bits : simde_mm512_srli_epi16(bits, 2 * j), m3);
              // Scale k in each 32-bit lane's low byte, zeros above: its (scale, 0) pair.
              scale[rg] = simde_mm512_shuffle_epi8(scales[rg], simde_mm512_set1_epi32(static_cast<int>(0x80808000u | static_cast<uint32_t>(k))));
            }
            add_scaled_subblock(sum, q, scale, a, b, 128 * h + 32 * j + 16 * half);
          }
        }
      }
      for (int rg = 0; rg < G; ++rg) {
        const V512 d = x[rg].f16(b, offsetof(Block, d)), dmin = x[rg].f16(b, offsetof(Block, dmin));
        const V512i mins = simde_mm512_and_si512(simde_mm512_srli_epi16(scales_mins[rg], 4), m4);
        const V512i mins_low = simde_mm512_unpacklo_epi8(mins, zero), mins_high = simde_mm512_unpackhi_epi8(mins, zero);  // 16-bit mins 0-7, 8-15
        add_block_with_mins(acc[rg], sum[rg], d, dmin, mins_low, mins_high, a, b);
      }
    }
    for (int rg = 0; rg < G; ++rg) store_rows4(acc[rg], out + 4 * rg, out_stride, rg == G - 1 ? last_rows : 4);
  }
};

// IQ4_XS with four rows per register, as DotQ2KRows4: each 128-bit lane holds 16 codes of
// one 32-element sub-block of its row. Sub-block k is the nibble pairs of qs[16k, +16) (low
// nibble element j, high j + 16) through the IQ4_NL code book stored +128, unsigned for
// vpdpbusd. Two vpdpbusd take its 32 elements against 32 broadcast activations: part, per
// 32-bit lane, the sum of 8 products (code + 128) x a, |part| < 2^18, too wide for
// vpdpwssd's 16-bit pairs, so vpmulld multiplies it by the sub-block's scale (-32..31) and
// vpaddd adds it to sum. The +128 comes off as -128 x sum_k(scale_k x asum_k), asum_k the
// activations' sum over sub-block k, one vpdpwssd per block and column (|-128 x scale| <=
// 4096): sum is then an exact integer per lane. Per lane, row and column,
// acc += (d x a.d) x float(sum), and a row's result is (l0 + l1) + (l2 + l3) of acc. The bits
// are the set's own, the same for any rows beside a row and any column count (a group
// short of four rows repeats its last row). With kPacked the groups are in the four-row
// layout, the rows after them in the file's, and a call with one column takes one group.
template <bool kPackedRows = false>
struct DotIQ4XSRows4 : InGroupsOfFour<DotIQ4XSRows4<kPackedRows>> {
  using Block = BlockIQ4_XS;
  static constexpr bool kPacked = kPackedRows;
  template <int C>
  static constexpr int kGroups = kPacked && C == 1 ? 1 : 2;  // groups of four rows per call, for C columns

  // Row i's scales_h (bytes 0-1) and scales_l (bytes 2-5) in 128-bit lane i.
  static V512i scale_fields(const FileRows4<Block>& x, int64_t b) { return x.field16(b, offsetof(Block, scales_h)); }
  static V512i scale_fields(const PackedRows4<Block>& x, int64_t b) {
    // The group's four scales_h (16-bit words 0-3), then its four scales_l (words 4-11).
    alignas(64) static constexpr uint16_t kWords[32] = {0, 4, 5, 0, 0, 0, 0, 0, 1, 6, 7, 0, 0, 0, 0, 0,
                                                        2, 8, 9, 0, 0, 0, 0, 0, 3, 10, 11, 0, 0, 0, 0, 0};
    return simde_mm512_permutexvar_epi16(load512(kWords), simde_mm512_castsi256_si512(load256(x.field(b, offsetof(Block, scales_h)))));
  }
  // Row i's eight scales in 128-bit lane i as 16-bit lanes: scale k is nibble k % 2 of
  // scales_l[k / 2], with bits 2k..2k+1 of scales_h above it, minus 32.
  static V512i scales16(V512i fields) {
    alignas(16) static constexpr uint8_t kLowBytes[16] = {2, 0x80, 2, 0x80, 3, 0x80, 3, 0x80, 4, 0x80, 4, 0x80, 5, 0x80, 5, 0x80};
    alignas(16) static constexpr uint8_t kHighBytes[16] = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
    alignas(16) static constexpr uint16_t kLowShift[8] = {0, 4, 0, 4, 0, 4, 0, 4};
    alignas(16) static constexpr uint16_t kHighShift[8] = {14, 12, 10, 8, 6, 4, 2, 0};  // bits 2k..2k+1 to the top
    const V512i low = simde_mm512_and_si512(simde_mm512_srlv_epi16(simde_mm512_shuffle_epi8(fields, broadcast128(kLowBytes)), broadcast128(kLowShift)),
                                            simde_mm512_set1_epi16(0x0F));  // bits 0-3
    const V512i high = simde_mm512_srli_epi16(simde_mm512_sllv_epi16(simde_mm512_shuffle_epi8(fields, broadcast128(kHighBytes)), broadcast128(kHighShift)), 10);
    return simde_mm512_sub_epi16(simde_mm512_ternarylogic_epi32(low, high, simde_mm512_set1_epi16(0x30), 0xF8), simde_mm512_set1_epi16(32));  // low | (high & 0x30)
  }
  // The activations' sums over sub-blocks 0-7 (bsums 2k + bsums 2k+1) in 16-bit lanes 0-7 of every 128-bit lane.
  static V512i subblock_sums(const BlockQ8_K& a) {
    const __m256i bsums = load256(a.bsums), pairs = _mm256_hadd_epi16(bsums, bsums);  // sums 0-3 in qword 0, 4-7 in qword 2
    return simde_mm512_broadcast_i32x4(_mm256_castsi256_si128(_mm256_permute4x64_epi64(pairs, _MM_SHUFFLE(2, 0, 2, 0))));
  }

  template <int C, int G, typename Rows>
  static void group(int64_t n, const Rows (&x)[G], size_t row_bytes, const BlockQ8_K* const (&a)[C], float* out, size_t out_stride,
                    int last_rows) {
    V512 acc[G][C];
    for (int rg = 0; rg < G; ++rg)
      for (int c = 0; c < C; ++c) acc[rg][c] = simde_mm512_setzero_ps();
    const V512i m4 = simde_mm512_set1_epi8(0x0F), zero = simde_mm512_setzero_si512(), book = broadcast128(kIQ4NLBiased.v);
    for (int64_t b = 0; b < n / 256; ++b) {
      V512i scales32[G][2], minus128_scales[G], sum[G][C];
      V512 d[G];
      for (int rg = 0; rg < G; ++rg) {
        x[rg].prefetch(b, row_bytes, 4 * G);
        d[rg] = x[rg].f16(b, offsetof(Block, d));
        const V512i s16 = scales16(scale_fields(x[rg], b));
        // Scales 0-3 and 4-7 as 32-bit lanes, each 16-bit scale beside its sign.
        const V512i sign = simde_mm512_srai_epi16(s16, 15);
        scales32[rg][0] = simde_mm512_unpacklo_epi16(s16, sign), scales32[rg][1] = simde_mm512_unpackhi_epi16(s16, sign);
        minus128_scales[rg] = simde_mm512_sub_epi16(zero, simde_mm512_slli_epi16(s16, 7));
        for (int c = 0; c < C; ++c) sum[rg][c] = zero;
      }
      for (int j = 0; j < 4; ++j) {
        RowHalves qs[G];  // sub-block 2j in `first`, 2j + 1 in `second`
        for (int rg = 0; rg < G; ++rg) qs[rg] = x[rg].field32(b, offsetof(Block, qs) + 32 * j);
        for (int h = 0; h < 2; ++h) {
          const int k = 2 * j + h;
          V512i q0[G], q1[G], scale[G];
          for (int rg = 0; rg < G; ++rg) {
            const V512i bits = h == 0 ? qs[rg].first : qs[rg].second;
            q0[rg] = simde_mm512_shuffle_epi8(book, simde_mm512_and_si512(bits, m4));
            q1[rg] = simde_mm512_shuffle_epi8(book, simde_mm512_and_si512(simde_mm512_srli_epi16(bits, 4), m4));
            const uint32_t lane = static_cast<uint32_t>(k % 4);
            scale[rg] = simde_mm512_shuffle_epi8(scales32[rg][k / 4], simde_mm512_set1_epi32(static_cast<int>(0x03020100u + 0x04040404u * lane)));
          }
          for (int c = 0; c < C; ++c) {
            const V512i a0 = broadcast128(a[c][b].qs + 32 * k), a1 = broadcast128(a[c][b].qs + 32 * k + 16);
            for (int rg = 0; rg < G; ++rg) {
              const V512i part = simde_mm512_dpbusd_epi32(simde_mm512_dpbusd_epi32(zero, q0[rg], a0), q1[rg], a1);
              sum[rg][c] = simde_mm512_add_epi32(sum[rg][c], simde_mm512_mullo_epi32(part, scale[rg]));
            }
          }
        }
      }
      for (int c = 0; c < C; ++c) {
        const V512i asum = subblock_sums(a[c][b]);
        const V512 ad = simde_mm512_set1_ps(a[c][b].d);
        for (int rg = 0; rg < G; ++rg) {
          const V512i total = simde_mm512_dpwssd_epi32(sum[rg][c], minus128_scales[rg], asum);
          acc[rg][c] = simde_mm512_fmadd_ps(simde_mm512_mul_ps(d[rg], ad), to_float(total), acc[rg][c]);
        }
      }
    }
    store_groups(acc, out, out_stride, last_rows);
  }
};

// F32, F16 and BF16 weights (DotFloat, kernel_common.h): 16 floats in one vector, lanes
// 0-7 and 8-15 summed as the AVX2 kernels' two halves are, so the bits are the same.
struct Floats16 {
  using T = V512;
  static constexpr int kAccumulators = 16;  // 16 of the 32 registers: four rows of four columns
  static T zero() { return simde_mm512_setzero_ps(); }
  static T load(const float* p) { return simde_mm512_loadu_ps(p); }
  template <typename L>
  static T load_weights(const void* w, int64_t i) {
#if defined(__AVX512F__)  // SIMDe 0.7 lacks the 512-bit conversions
    if constexpr (std::is_same_v<L, LoadF32>) {
      return _mm512_loadu_ps(static_cast<const float*>(w) + i);
    } else {
      static_assert(std::is_same_v<L, LoadF16>);  // BF16: load_bf16_pairs
      return _mm512_cvtph_ps(load256(static_cast<const uint16_t*>(w) + i));
    }
#else
    return join(L::load8(w, i), L::load8(w, i + 8));
#endif
  }
  // 32 BF16 weights from element i: lane j holds elements 2j and 2j + 1, as floats.
  struct Pair {
    T even, odd;
  };
  static Pair load_bf16_pairs(const void* w, int64_t i) {
    const V512i v = simde_mm512_loadu_si512(static_cast<const uint16_t*>(w) + i);
    return {simde_mm512_castsi512_ps(simde_mm512_slli_epi32(v, 16)),
            simde_mm512_castsi512_ps(simde_mm512_and_si512(v, simde_mm512_set1_epi32(static_cast<int32_t>(0xffff0000u))))};
  }
  static T fmadd(T w, T a, T acc) { return simde_mm512_fmadd_ps(w, a, acc); }
  static float sum(T acc) { return hsum512(acc); }
};

// ---- K formats with four rows per register ----
// K::group<C, G> on G groups of four rows at a time (x[g]: group g's four rows' blocks),
// first K::kGroups groups per call, then single groups; the rows after them, and runs of
// fewer than K::kMinCols columns, go to the AVX2 kernel for K::kType, whose bits K gives.
// Which rows share a call changes no number: each row's operations are its own.
// With K::kPacked the groups are in the four-row layout (quant/rows4_layout.h), the rows
// after them in the file's.
template <typename K, int C>
void rows4_matmul(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
                  size_t out_stride) {
  static_assert(!K::kPacked || K::kMinCols == 1, "the AVX2 kernels do not read the four-row layout");
  using Rows = std::conditional_t<K::kPacked, PackedRows4<typename K::Block>, FileRows4<typename K::Block>>;
  int64_t r = 0;
  if constexpr (C >= K::kMinCols) {
    const BlockQ8_K* a[C];
    for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c);
    auto calls = [&]<int G>(std::integral_constant<int, G>) {
      for (; r + 4 * G <= n_rows; r += 4 * G) {
        Rows x[G];
        for (int g = 0; g < G; ++g) {
          const uint8_t* group = w + static_cast<size_t>(r + 4 * g) * row_bytes;
          if constexpr (K::kPacked) {
            x[g].group = group;
          } else {
            for (int i = 0; i < 4; ++i) x[g].x[i] = reinterpret_cast<const typename K::Block*>(group + static_cast<size_t>(i) * row_bytes);
          }
        }
        K::template group<C, G>(n, x, row_bytes, a, out + r, out_stride);
      }
    };
    calls(std::integral_constant<int, K::template kGroups<C>>{});
    if constexpr (K::template kGroups<C> > 1) calls(std::integral_constant<int, 1>{});
  }
  if (r < n_rows) {
    dot_kernel(*avx2_kernels(), K::kType)(n, w + static_cast<size_t>(r) * row_bytes, row_bytes, n_rows - r, act, stride, C, out + r, out_stride);
  }
}

// Q4_K and Q5_K: the set's own bits. Per row and block, two exact integers, sum =
// sum_k scale_k x (codes . activations of sub-block k) and min_sum = sum_k min_k x (sum of
// the activations of sub-block k); then acc = fma(a.d, d x float(sum) - dmin x float(min_sum),
// acc) in the row's float, the blocks in order. Integer sums have one value in any order,
// so the two kernels below, four rows per register (decode and few columns) and sixteen
// (prompts), give the same bits for every row and column count, in either layout. (The
// AVX2 kernels split each row over four lanes through the float operations: other bits.)
//
// Four rows per register, one per 128-bit lane: lane l of a row sums, for each sub-block
// k, scale_k x the products of its elements 4l..4l+3 and 16+4l..16+4l+3. One vpdpbusd
// takes 16 codes of each of four rows (unsigned, <= 31) against the same 16 activations
// broadcast to every lane, a second the sub-block's other 16, and one vpdpwssd multiplies
// the result by the scale and adds it: three instructions per 128 products. A lane's
// partial |sum| <= 8 x 31 x 128 = 31744 fits in 16 bits, so vpdpwssd against (scale, 0)
// pairs multiplies it exactly. At the end of a block a row's four lanes are added.
// A call takes two groups of four rows (kGroups), so that each broadcast of 16
// activations feeds a vpdpbusd for both: with one group, the broadcasts, one per
// vpdpbusd, bound the loop before the multiplies do (docs/PERFORMANCE.md, stop 42).
// Q5_K with one column keeps one group: two ran slower with rows in cache. A group short
// of four rows repeats its last row. The rows are in the file layout.
template <bool kFive>
struct DotQ45KRows4 : InGroupsOfFour<DotQ45KRows4<kFive>> {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  static constexpr bool kPacked = false;
  template <int C>
  static constexpr int kGroups = kFive && C == 1 ? 1 : 2;  // groups of four rows per call, for C columns

  template <int C, int G, typename Rows>
  static void group(int64_t n, const Rows (&x)[G], size_t row_bytes, const BlockQ8_K* const (&a)[C], float* out, size_t out_stride,
                    int last_rows) {
    V512 acc[G][C];
    for (int rg = 0; rg < G; ++rg)
      for (int c = 0; c < C; ++c) acc[rg][c] = simde_mm512_setzero_ps();
    const V512i m4 = simde_mm512_set1_epi8(0x0F);
    const V512i mins_index[2] = {broadcast128(kRowPairMins[0]), broadcast128(kRowPairMins[1])};
    for (int64_t b = 0; b < n / 256; ++b) {
      V512i scales_mins[G];
      V512i fifth_bits[G][2] = {};
      for (int rg = 0; rg < G; ++rg) {
        x[rg].prefetch(b, row_bytes, 4 * G);
        // Row i's eight scales then eight mins in lane i.
        auto scales = [&](int i) { return x[rg].row_field(b, offsetof(Block, scales), i); };
        scales_mins[rg] = simde_mm512_inserti64x4(simde_mm512_castsi256_si512(k4_scales_and_mins_x2(scales(0), scales(1))),
                                                 k4_scales_and_mins_x2(scales(2), scales(3)), 1);
        // Q5_K: bit k of each byte is the fifth bit of sub-block k's elements 0-15 and 16-31,
        // shifted right once per sub-block so that bit 0 is the current one's.
        if constexpr (kFive) {
          const RowHalves qh = x[rg].field32(b, offsetof(Block, qh));
          fifth_bits[rg][0] = qh.first, fifth_bits[rg][1] = qh.second;
        }
      }
      V512i sum[G][C];
      for (int rg = 0; rg < G; ++rg)
        for (int c = 0; c < C; ++c) sum[rg][c] = simde_mm512_setzero_si512();
      for (int j = 0; j < 4; ++j) {
        // Elements 0-15 and 16-31 of sub-blocks 2j (low nibbles) and 2j + 1 (high).
        RowHalves rows[G];
        for (int rg = 0; rg < G; ++rg) rows[rg] = x[rg].field32(b, offsetof(Block, qs) + 32 * j);
        for (int h = 0; h < 2; ++h) {
          const int k = 2 * j + h;
          V512i q0[G], q1[G], scale[G];
          for (int rg = 0; rg < G; ++rg) {
            q0[rg] = simde_mm512_and_si512(h == 0 ? rows[rg].first : simde_mm512_srli_epi16(rows[rg].first, 4), m4);
            q1[rg] = simde_mm512_and_si512(h == 0 ? rows[rg].second : simde_mm512_srli_epi16(rows[rg].second, 4), m4);
            if constexpr (kFive) {
              const V512i one = simde_mm512_set1_epi8(1);
              q0[rg] = simde_mm512_or_si512(q0[rg], simde_mm512_slli_epi16(simde_mm512_and_si512(fifth_bits[rg][0], one), 4));
              q1[rg] = simde_mm512_or_si512(q1[rg], simde_mm512_slli_epi16(simde_mm512_and_si512(fifth_bits[rg][1], one), 4));
              fifth_bits[rg][0] = simde_mm512_srli_epi16(fifth_bits[rg][0], 1);
              fifth_bits[rg][1] = simde_mm512_srli_epi16(fifth_bits[rg][1], 1);
            }
            // Scale k of each lane's row as (scale, 0) 16-bit pairs.
            scale[rg] = simde_mm512_shuffle_epi8(scales_mins[rg], simde_mm512_set1_epi32(static_cast<int>(0x80808000u | static_cast<uint32_t>(k))));
          }
          for (int c = 0; c < C; ++c) {
            const int8_t* aq = a[c][b].qs + 32 * k;
            const V512i a0 = broadcast128(aq), a1 = broadcast128(aq + 16);
            for (int rg = 0; rg < G; ++rg) {
              const V512i part = simde_mm512_dpbusd_epi32(simde_mm512_dpbusd_epi32(simde_mm512_setzero_si512(), q0[rg], a0), q1[rg], a1);
              sum[rg][c] = simde_mm512_dpwssd_epi32(sum[rg][c], part, scale[rg]);
            }
          }
        }
      }
      for (int rg = 0; rg < G; ++rg) {
        const V512 d = x[rg].f16(b, offsetof(Block, d)), dmin = x[rg].f16(b, offsetof(Block, dmin));
        const V512i mins_low = simde_mm512_shuffle_epi8(scales_mins[rg], mins_index[0]);
        const V512i mins_high = simde_mm512_shuffle_epi8(scales_mins[rg], mins_index[1]);
        add_block_with_mins(acc[rg], sum[rg], d, dmin, mins_low, mins_high, a, b);
      }
    }
    for (int rg = 0; rg < G; ++rg) store_rows4(acc[rg], out + 4 * rg, out_stride, rg == G - 1 ? last_rows : 4);
  }
};

// Bytes 2i and 2i + 1 (i = 0 or 1) of each 32-bit lane of v as the lane's two 16-bit
// halves: a pair for vpdpwssd.
inline V512i byte_pair(V512i v, int i) {
  const V512i low = simde_mm512_set1_epi32(0xFF), high = simde_mm512_set1_epi32(0xFF0000);
  return i == 0 ? simde_mm512_or_si512(simde_mm512_and_si512(v, low), simde_mm512_and_si512(simde_mm512_slli_epi32(v, 8), high))
                : simde_mm512_or_si512(simde_mm512_and_si512(simde_mm512_srli_epi32(v, 16), low), simde_mm512_and_si512(simde_mm512_srli_epi32(v, 8), high));
}

// ---- Sixteen rows per register, one per 32-bit lane ----
// With the rows in 32-bit lanes, each vpdpbusd takes 4 codes of sixteen rows against the
// same 4 activations (an embedded broadcast), and a lane adds all 32 products of a
// sub-block: the scale multiplies once per 32 elements, not once per 8 as four rows per
// register need. Loading costs a transpose, shared by every column of the call.

// Sixteen rows in the file layout: rows 4g..4g+3 are x[g].
template <typename Block>
struct FileRows16 {
  static constexpr bool kTransposed = true;  // each dwords() is a transpose
  FileRows4<Block> x[4];
  // 16 bytes at `within` of the field at `at` of each row's block b,
  // transposed: dword j of row r in 32-bit lane r of out[j].
  void dwords(int64_t b, size_t at, size_t within, V512i (&out)[4]) const {
    V512i rows[4];  // rows[m]: the 16 bytes of row 4L + m in 128-bit lane L
    for (int m = 0; m < 4; ++m) {
      auto piece = [&](int g) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[g].row_field(b, at, m) + within)); };
      rows[m] = simde_mm512_inserti32x4(
          simde_mm512_inserti32x4(simde_mm512_inserti32x4(simde_mm512_castsi128_si512(piece(0)), piece(1), 1), piece(2), 2), piece(3), 3);
    }
    // A 4 x 4 transpose of 32-bit lanes within each 128-bit lane.
    const V512i t0 = simde_mm512_unpacklo_epi32(rows[0], rows[1]), t1 = simde_mm512_unpackhi_epi32(rows[0], rows[1]);
    const V512i t2 = simde_mm512_unpacklo_epi32(rows[2], rows[3]), t3 = simde_mm512_unpackhi_epi32(rows[2], rows[3]);
    out[0] = simde_mm512_unpacklo_epi64(t0, t2), out[1] = simde_mm512_unpackhi_epi64(t0, t2);
    out[2] = simde_mm512_unpacklo_epi64(t1, t3), out[3] = simde_mm512_unpackhi_epi64(t1, t3);
  }
  // An F16 field of every row as floats, row r's in lane r.
  V512 f16(int64_t b, size_t at) const {
    auto h = [&](int g) { return static_cast<long long>(x[g].halves(b, at)); };
    return halves_to_float(_mm256_set_epi64x(h(3), h(2), h(1), h(0)));
  }
  // Each group's prefetch (FileRows4).
  void prefetch(int64_t b, size_t row_bytes) const {
    for (const FileRows4<Block>& g : x) g.prefetch(b, row_bytes, 16);
  }
};

// Sixteen rows in the sixteen-row layout (quant/rows4_layout.h), the interface of FileRows16
// without its transposes: the 2- or 4-byte piece at byte o of row r's block b is at
// group + b * 16 * sizeof(Block) + 16 * o + r * (piece size). A group is one stream, which
// the hardware prefetcher follows; the kernel asks for one line in kPrefetchStep bytes
// as well. On a Zen 4, Q4_K from DRAM (bench Matvec and MatmulDram, .../rows4): one column
// streamed 24-28 GB/s a core with one line in 256 bytes, 17-21 with every line; 6-16
// columns ran 123-138 GMAC/s with every line, 100-117 with one in 256 (docs/PERFORMANCE.md,
// stop 53). On an Intel Xeon (Emerald Rapids) one column streamed 0.81-0.84 of the read
// probe with one line in 256 bytes, 0.95-1.00 with every line (stop 59); on a Zen 5
// 0.49-0.66 and 0.78-0.96 (stop 60). Each kernel names
// its step for one column (kOneColumnPrefetchStep): Q4_K's and Q5_K's a parameter, the
// others' 64.
template <typename Block, size_t kPrefetchStep>
struct PackedRows16 {
  static constexpr bool kTransposed = false;  // each dwords() is four loads
  const uint8_t* group;
  const uint8_t* piece(int64_t b, size_t o) const { return group + static_cast<size_t>(b) * 16 * sizeof(Block) + 16 * o; }
  void dwords(int64_t b, size_t at, size_t within, V512i (&out)[4]) const {
    for (int j = 0; j < 4; ++j) out[j] = load512(piece(b, at + within) + 64 * j);
  }
  V512 f16(int64_t b, size_t at) const { return halves_to_float(load256(piece(b, at))); }
  // Lines kPrefetchBytes ahead of block b's.
  void prefetch(int64_t b, size_t) const {
    const uint8_t* ahead = piece(b, 0) + kPrefetchBytes;
    for (size_t line = 0; line < 16 * sizeof(Block); line += kPrefetchStep) prefetch_into_l2(ahead + line);
  }
};

// Q4_K and Q5_K with sixteen rows per register, the bits of DotQ45KRows4. Per block, the
// packed 6-bit scales and mins of the sixteen rows come in as three transposed dwords
// (bytes 0-3, 4-7, 8-11), and are unpacked with whole-lane masks. Per 16-byte piece of the
// codes, dword t holds elements 4t..4t+3 of sub-block 2j (low nibbles) and of 2j + 1
// (high): vpdpbusd against the activations at the same places, into the sub-block's part.
// After 32 elements vpmulld multiplies each part by its sub-block's scale, into sum
// (|part| <= 32 x 31 x 128 needs more than 16 bits). min_sum takes one vpdpwssd per two
// sub-blocks.
template <bool kFive, size_t kOneColumnStep>
struct DotQ45KRows16 {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  static constexpr size_t kOneColumnPrefetchStep = kOneColumnStep;  // see PackedRows16

  template <int C, typename Sixteen>
  static void group(int64_t n, const Sixteen& x, size_t row_bytes, const BlockQ8_K* const (&a)[C], float* out, size_t out_stride) {
    V512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = simde_mm512_setzero_ps();
    const V512i m4 = simde_mm512_set1_epi8(0x0F), low6 = simde_mm512_set1_epi8(0x3F), top2 = simde_mm512_set1_epi8(0x30);
    const V512i byte0 = simde_mm512_set1_epi32(0xFF), bit4 = simde_mm512_set1_epi8(0x10);
    for (int64_t b = 0; b < n / 256; ++b) {
      x.prefetch(b, row_bytes);
      V512i packed[4];
      x.dwords(b, offsetof(Block, scales), 0, packed);
      // Bytes 0-3 of scales4[0] are scales 0-3, of scales4[1] scales 4-7; mins4 likewise.
      const V512i scales4[2] = {simde_mm512_and_si512(packed[0], low6),
                                simde_mm512_or_si512(simde_mm512_and_si512(packed[2], m4), simde_mm512_and_si512(simde_mm512_srli_epi32(packed[0], 2), top2))};
      const V512i mins4[2] = {simde_mm512_and_si512(packed[1], low6),
                              simde_mm512_or_si512(simde_mm512_and_si512(simde_mm512_srli_epi32(packed[2], 4), m4),
                                                   simde_mm512_and_si512(simde_mm512_srli_epi32(packed[1], 2), top2))};
      auto byte_of = [&](const V512i (&v)[2], int k) { return simde_mm512_and_si512(simde_mm512_srli_epi32(v[k / 4], 8 * (k % 4)), byte0); };
      V512i fifth[2][4];  // Q5_K: bit k of each byte of qh, transposed as the codes' pieces (two sub-blocks a pass: moved down as used)
      if constexpr (kFive) {
        for (int h = 0; h < 2; ++h) x.dwords(b, offsetof(Block, qh), 16 * h, fifth[h]);
      }
      // Sub-blocks S at a time per load of the codes: both of a piece's (2j and 2j + 1) while
      // 2C partial sums fit the registers with the rest; one where they spilled, from six
      // columns on (Q5_K, whose fifth bits take eight more registers, from five). On a
      // Zen 4 in cache, Q4_K at eight columns ran 160 GMAC/s against 146, Q5_K 146-158
      // against 118-122 (docs/PERFORMANCE.md, stop 54). Where the pieces come through
      // transposes, one sub-block per pass would transpose each twice: there both stay
      // (Zen 4, file layout, Q4_K at 6-64 columns: 132-138 GMAC/s against 112-132).
      constexpr int S = C <= (kFive ? 4 : 5) || Sixteen::kTransposed ? 2 : 1;
      V512i sum[C];
      for (int c = 0; c < C; ++c) sum[c] = simde_mm512_setzero_si512();
      auto sub_blocks = [&](int k0) {
        const int j = k0 / 2;
        V512i part[S][C];
        for (auto& p : part) {
          for (V512i& v : p) v = simde_mm512_setzero_si512();
        }
        for (int h = 0; h < 2; ++h) {
          V512i codes[4];
          x.dwords(b, offsetof(Block, qs) + 32 * j, 16 * h, codes);
          for (int t = 0; t < 4; ++t) {
            for (int s = 0; s < S; ++s) {
              const int k = k0 + s;
              V512i q = simde_mm512_and_si512(k % 2 == 0 ? codes[t] : simde_mm512_srli_epi16(codes[t], 4), m4);
              if constexpr (kFive) {
                // Bit k of each byte, at bit e of fifth, to bit 4 (no bit of a neighbouring byte reaches bit 4).
                const int e = S == 2 ? s : k;
                const V512i moved = e <= 4 ? simde_mm512_slli_epi16(fifth[h][t], 4 - e) : simde_mm512_srli_epi16(fifth[h][t], e - 4);
                q = simde_mm512_or_si512(q, simde_mm512_and_si512(moved, bit4));
              }
              for (int c = 0; c < C; ++c) part[s][c] = dot_bytes(part[s][c], q, a[c][b].qs + 32 * k + 16 * h + 4 * t);
            }
          }
        }
        for (int s = 0; s < S; ++s) {
          const V512i scale = byte_of(scales4, k0 + s);
          for (int c = 0; c < C; ++c) sum[c] = simde_mm512_add_epi32(sum[c], simde_mm512_mullo_epi32(part[s][c], scale));
        }
        if constexpr (kFive && S == 2) {
          // Two sub-blocks a pass: the loop below stays a loop, so fifth moves down by two bits
          // a pass and the shifts above are by constants. Shifting by k instead, GCC rebuilt the
          // counts in vector registers: Q5_K at 1 / 4 columns in cache ran 48-51 / 119-128
          // GMAC/s against 57-64 / 134-136 (docs/PERFORMANCE.md, stop 56).
          for (auto& f : fifth) {
            for (V512i& v : f) v = simde_mm512_srli_epi16(v, 2);
          }
        }
      };
      if constexpr (S == 2) {
        for (int k0 = 0; k0 < 8; k0 += S) sub_blocks(k0);
      } else {  // unrolled, or GCC keeps k and h in registers and spills the shifted fifth bits
#pragma GCC unroll 8
        for (int k0 = 0; k0 < 8; k0 += S) sub_blocks(k0);
      }
      // The mins, a column at a time: each column's sub-block sums B_k = bsums[2k] +
      // bsums[2k + 1] (|B_k| <= 32 x 128) as 16-bit pairs (B_2i, B_2i+1), against
      // (min_2i, min_2i+1) pairs, one vpdpwssd per two sub-blocks.
      V512i min_pairs[4];
      for (int i = 0; i < 4; ++i) min_pairs[i] = byte_pair(mins4[i / 2], i % 2);
      const V512 d = x.f16(b, offsetof(Block, d)), dmin = x.f16(b, offsetof(Block, dmin));
      for (int c = 0; c < C; ++c) {
        const __m256i sums = _mm256_madd_epi16(load256(a[c][b].bsums), _mm256_set1_epi16(1));
        const __m256i packed16 = _mm256_packs_epi32(sums, sums);  // B0-B3 twice, then B4-B7 twice
        alignas(16) int32_t pair_sums[4];
        _mm_storel_epi64(reinterpret_cast<__m128i*>(pair_sums), _mm256_castsi256_si128(packed16));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(pair_sums + 2), _mm256_extracti128_si256(packed16, 1));
        V512i min_sum = simde_mm512_setzero_si512();
        for (int i = 0; i < 4; ++i) min_sum = dot_pairs(min_sum, min_pairs[i], pair_sums + i);
        acc[c] = add_block(acc[c], sum[c], min_sum, d, dmin, a[c][b].d);
      }
    }
    for (int c = 0; c < C; ++c) simde_mm512_storeu_ps(out + static_cast<size_t>(c) * out_stride, acc[c]);
  }
};

// Where a K format call's rows are: the file layout, or the sixteen-row layout
// (quant/rows4_layout.h), whose rows after the last group are in the file's.
enum class Layout { kFile, kRows16 };

// Sixteen rows at a time through K16::group while sixteen remain (in the sixteen-row
// layout, the groups; in the file's, as FileRows16); returns how many rows that took.
template <typename K16, Layout L, int C>
int64_t sixteen_rows_at_a_time(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
                               size_t out_stride) {
  using Block = typename K16::Block;
  const BlockQ8_K* a[C];
  for (int c = 0; c < C; ++c) a[c] = act_col<BlockQ8_K>(act, stride, c);
  int64_t r = 0;
  for (; r + 16 <= n_rows; r += 16) {
    const uint8_t* rows = w + static_cast<size_t>(r) * row_bytes;
    if constexpr (L == Layout::kRows16) {
      K16::group(n, PackedRows16<Block, C == 1 ? K16::kOneColumnPrefetchStep : 64>{rows}, row_bytes, a, out + r, out_stride);
    } else {
      FileRows16<Block> x;
      for (int g = 0; g < 4; ++g) {
        const uint8_t* group = rows + static_cast<size_t>(4 * g) * row_bytes;
        for (int i = 0; i < 4; ++i) x.x[g].x[i] = reinterpret_cast<const Block*>(group + static_cast<size_t>(i) * row_bytes);
      }
      K16::group(n, x, row_bytes, a, out + r, out_stride);
    }
  }
  return r;
}

// Columns from which a prompt kernel K16 takes sixteen rows at a time: in the sixteen-row
// layout every count, in the others kMinCols.
template <Layout L, int kMinCols, int C>
constexpr bool sixteen_rows() { return L == Layout::kRows16 || C >= kMinCols; }

// A K format's matmul in layout L: with kMinCols columns or more (in the sixteen-row layout,
// any), sixteen rows at a time through K16 while sixteen remain, then the rest through
// Rest (its matmul, or its run row by row), whose bits K16 gives.
template <typename K16, typename Rest, int kMinCols, Layout L>
struct SixteenRowsThen {
  template <int C>
  static void matmul(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
                     size_t out_stride) {
    int64_t r = 0;
    if constexpr (sixteen_rows<L, kMinCols, C>()) r = sixteen_rows_at_a_time<K16, L, C>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
    columns<Rest, C>(n, w + static_cast<size_t>(r) * row_bytes, row_bytes, n_rows - r, act, stride, out + r, out_stride);
  }
};

// Q4_K and Q5_K: from 4 (Q5_K: 7) columns (in the sixteen-row layout, any), sixteen rows
// at a time, then four (DotQ45KRows4) for the rest; fewer columns, four at a time. On a Zen 4 with rows in cache, sixteen rows ran Q4_K 1.1-1.4x faster than four
// from 4 columns on; Q5_K, whose fifth bits cost a second transpose, only from 7
// (docs/PERFORMANCE.md, stop 52). kOneColumnStep: PackedRows16's prefetch step for one
// column in the sixteen-row layout.
template <bool kFive, Layout L = Layout::kFile, size_t kOneColumnStep = 64>
using DotQ45K = SixteenRowsThen<DotQ45KRows16<kFive, kOneColumnStep>, DotQ45KRows4<kFive>, kFive ? 7 : 4, L>;

// Q6_K with four rows per register: each 128-bit lane holds one 16-element sub-block of
// its row, so one vpdpbusd takes a sub-block of each of four rows (codes 0-63, stored +32)
// and one vpdpwssd multiplies its lanes (|sum of 4 products| <= 4 x 63 x 128 < 2^15) by
// the row's scale and adds them. The +32 comes off as -32 x sum(scale x bsum), two more
// vpdpwssd per block and column against the scales x -32. Each row's block total is then
// one exact integer, multiplied as the AVX2 kernel (DotQ6K in dot_avx2.cpp) does it,
// fma(d x a.d, total, sum): both sets give the same bits for every row and column. Fewer
// than kMinColumns columns go to the AVX2 kernel (see make_avx512). With two or more
// columns a call takes two groups of four rows, which share each activation broadcast, as
// DotQ45KRows4 does; with one column, one group (two ran slower with rows in cache). The
// rows are in the file layout.
template <int kMinColumns>
struct DotQ6KRows4 {
  using Block = BlockQ6_K;
  static constexpr Type kType = Type::Q6_K;
  static constexpr int kMinCols = kMinColumns;
  static constexpr bool kPacked = false;
  template <int C>
  static constexpr int kGroups = C > 1 ? 2 : 1;  // groups of four rows per call, for C columns

  template <int C, int G, typename Rows>
  static void group(int64_t n, const Rows (&x)[G], size_t row_bytes, const BlockQ8_K* const (&a)[C], float* out, size_t out_stride) {
    V512 acc[G][C];
    for (int rg = 0; rg < G; ++rg)
      for (int c = 0; c < C; ++c) acc[rg][c] = simde_mm512_setzero_ps();
    const V512i m4 = simde_mm512_set1_epi8(0x0F), m30 = simde_mm512_set1_epi8(0x30);
    for (int64_t b = 0; b < n / 256; ++b) {
      V512i scales16[G][2], sum[G][C];
      for (int rg = 0; rg < G; ++rg) {
        x[rg].prefetch(b, row_bytes, 4 * G);
        // Row i's 16 scales in lane i, as 16-bit lanes: scales 0-7 in scales16[0], 8-15 in [1].
        const V512i scales8 = x[rg].field16(b, offsetof(Block, scales));
        const V512i sign = simde_mm512_movm_epi8(simde_mm512_movepi8_mask(scales8));
        scales16[rg][0] = simde_mm512_unpacklo_epi8(scales8, sign), scales16[rg][1] = simde_mm512_unpackhi_epi8(scales8, sign);
        // Each column's sum starts from -32 x sum(scale x bsum), two sub-blocks per 32-bit lane.
        const V512i bias0 = simde_mm512_sub_epi16(simde_mm512_setzero_si512(), simde_mm512_slli_epi16(scales16[rg][0], 5));
        const V512i bias1 = simde_mm512_sub_epi16(simde_mm512_setzero_si512(), simde_mm512_slli_epi16(scales16[rg][1], 5));
        for (int c = 0; c < C; ++c) {
          sum[rg][c] = simde_mm512_dpwssd_epi32(simde_mm512_madd_epi16(bias0, broadcast128(a[c][b].bsums)), bias1, broadcast128(a[c][b].bsums + 8));
        }
      }
      for (int h = 0; h < 2; ++h) {
        RowHalves qh[G];
        for (int rg = 0; rg < G; ++rg) qh[rg] = x[rg].field32(b, offsetof(Block, qh) + 32 * h);
        for (int p = 0; p < 2; ++p) {
          RowHalves ql[G];
          for (int rg = 0; rg < G; ++rg) ql[rg] = x[rg].field32(b, offsetof(Block, ql) + 64 * h + 32 * p);
          for (int g = p; g < 4; g += 2) {
            // Group g: elements 128h + 32g + [0, 32), nibble g / 2 of ql[64h + 32p + l] and
            // bits 2g..2g+1 of qh[32h + l], as `first` (l < 16) and `second` halves.
            for (int half = 0; half < 2; ++half) {
              const int k = 2 * g + half;
              V512i q[G], scale[G];
              for (int rg = 0; rg < G; ++rg) {
                const V512i low = half == 0 ? ql[rg].first : ql[rg].second, high = half == 0 ? qh[rg].first : qh[rg].second;
                const V512i nibble = simde_mm512_and_si512(g < 2 ? low : simde_mm512_srli_epi16(low, 4), m4);
                const V512i top = g == 0 ? simde_mm512_slli_epi16(high, 4) : g == 1 ? simde_mm512_slli_epi16(high, 2)
                                  : g == 2 ? high : simde_mm512_srli_epi16(high, 2);
                q[rg] = simde_mm512_or_si512(nibble, simde_mm512_and_si512(top, m30));
                // Scale of sub-block 8h + 2g + half as (scale, 0) 16-bit pairs.
                scale[rg] = simde_mm512_shuffle_epi8(scales16[rg][h], simde_mm512_set1_epi32(static_cast<int>(0x80800000u | static_cast<uint32_t>(2 * k) | static_cast<uint32_t>(2 * k + 1) << 8)));
              }
              add_scaled_subblock(sum, q, scale, a, b, 128 * h + 32 * g + 16 * half);
            }
          }
        }
      }
      for (int rg = 0; rg < G; ++rg) {
        const V512 d = x[rg].f16(b, offsetof(Block, d));
        for (int c = 0; c < C; ++c) {
          acc[rg][c] = simde_mm512_fmadd_ps(simde_mm512_mul_ps(d, simde_mm512_set1_ps(a[c][b].d)), to_float(row_totals(sum[rg][c])), acc[rg][c]);
        }
      }
    }
    for (int rg = 0; rg < G; ++rg) store_rows4(acc[rg], out + 4 * rg, out_stride);
  }

  template <int C>
  static void matmul(int64_t n, const uint8_t* w, size_t row_bytes, int64_t n_rows, const void* act, size_t stride, float* out,
                     size_t out_stride) {
    rows4_matmul<DotQ6KRows4, C>(n, w, row_bytes, n_rows, act, stride, out, out_stride);
  }
};

// The offset of codes stored +2^kShift (Q3_K 4, Q6_K 32) taken off each column's total of
// a block of sixteen rows: total[c] -= 2^kShift x sum_k(scale_k x bsums_k), one vpdpwssd per
// two sub-blocks, (-2^kShift x scale_2i, -2^kShift x scale_2i+1) 16-bit pairs against
// (bsums 2i, 2i + 1). scale[k]: sub-block k's signed scale of each row, in 32 bits.
template <int kShift, int C>
inline void take_off_code_offset(V512i (&total)[C], const V512i (&scale)[16], const BlockQ8_K* const (&a)[C], int64_t b) {
  const V512i low16 = simde_mm512_set1_epi32(0xFFFF);
  auto offset = [&](int k) { return simde_mm512_sub_epi32(simde_mm512_setzero_si512(), simde_mm512_slli_epi32(scale[k], kShift)); };
  for (int i = 0; i < 8; ++i) {
    const V512i pair = simde_mm512_or_si512(simde_mm512_and_si512(offset(2 * i), low16), simde_mm512_slli_epi32(offset(2 * i + 1), 16));
    for (int c = 0; c < C; ++c) total[c] = dot_pairs(total[c], pair, a[c][b].bsums + 2 * i);
  }
}

// Q6_K with sixteen rows per register, one per 32-bit lane, the bits of DotQ6KRows4 (and of
// the AVX2 kernel): per 16-byte piece l0..l0+15 of ql[64h..] (A), ql[64h + 32..] (B) and
// qh[32h..] (H), dword t holds elements l0 + 4t..+3 of the four 16-element sub-blocks
// 8h + 2g + l0 / 16, g = 0-3: codes A & 15 | (H << 4) & 48, B & 15 | (H << 2) & 48,
// A >> 4 | H & 48, B >> 4 | (H >> 2) & 48 (0-63, stored +32). Four vpdpbusd take a
// sub-block's 16 elements into part (|part| <= 16 x 63 x 128), vpmulld multiplies it by the
// sub-block's signed scale, and the +32 comes off as -32 x sum_k(scale_k x bsums_k), one
// vpdpwssd per two sub-blocks: each row's block total is the exact integer of the AVX2
// kernel, multiplied as it does, fma(d x a.d, total, acc).
struct DotQ6KRows16 {
  using Block = BlockQ6_K;
  static constexpr size_t kOneColumnPrefetchStep = 64;  // see PackedRows16

  template <int C, typename Sixteen>
  static void group(int64_t n, const Sixteen& x, size_t row_bytes, const BlockQ8_K* const (&a)[C], float* out, size_t out_stride) {
    V512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = simde_mm512_setzero_ps();
    const V512i m4 = simde_mm512_set1_epi8(0x0F), m48 = simde_mm512_set1_epi8(0x30), byte0 = simde_mm512_set1_epi32(0xFF);
    const V512i sign = simde_mm512_set1_epi32(0x80);
    for (int64_t b = 0; b < n / 256; ++b) {
      x.prefetch(b, row_bytes);
      V512i packed[4];
      x.dwords(b, offsetof(Block, scales), 0, packed);
      V512i scale[16];  // sign-extended to 32 bits
      for (int k = 0; k < 16; ++k) {
        const V512i byte = simde_mm512_and_si512(simde_mm512_srli_epi32(packed[k / 4], 8 * (k % 4)), byte0);
        scale[k] = simde_mm512_sub_epi32(simde_mm512_xor_si512(byte, sign), sign);
      }
      V512i total[C];
      for (int c = 0; c < C; ++c) total[c] = simde_mm512_setzero_si512();
      take_off_code_offset<5>(total, scale, a, b);
      for (int h = 0; h < 2; ++h) {
        for (int p = 0; p < 2; ++p) {
          V512i ql_a[4], ql_b[4], qh[4];
          x.dwords(b, offsetof(Block, ql) + 64 * h, 16 * p, ql_a);
          x.dwords(b, offsetof(Block, ql) + 64 * h + 32, 16 * p, ql_b);
          x.dwords(b, offsetof(Block, qh) + 32 * h, 16 * p, qh);
          for (int g = 0; g < 4; ++g) {
            V512i part[C];
            for (int c = 0; c < C; ++c) part[c] = simde_mm512_setzero_si512();
            for (int t = 0; t < 4; ++t) {
              const V512i low = g % 2 == 0 ? ql_a[t] : ql_b[t];
              const V512i nibble = simde_mm512_and_si512(g < 2 ? low : simde_mm512_srli_epi16(low, 4), m4);
              const V512i top = g == 0 ? simde_mm512_slli_epi16(qh[t], 4) : g == 1 ? simde_mm512_slli_epi16(qh[t], 2)
                                : g == 2 ? qh[t] : simde_mm512_srli_epi16(qh[t], 2);
              const V512i q = simde_mm512_or_si512(nibble, simde_mm512_and_si512(top, m48));
              for (int c = 0; c < C; ++c) {
                part[c] = dot_bytes(part[c], q, a[c][b].qs + 128 * h + 32 * g + 16 * p + 4 * t);
              }
            }
            const V512i s = scale[8 * h + 2 * g + p];
            for (int c = 0; c < C; ++c) total[c] = simde_mm512_add_epi32(total[c], simde_mm512_mullo_epi32(part[c], s));
          }
        }
      }
      const V512 d = x.f16(b, offsetof(Block, d));
      for (int c = 0; c < C; ++c) acc[c] = simde_mm512_fmadd_ps(simde_mm512_mul_ps(d, simde_mm512_set1_ps(a[c][b].d)), to_float(total[c]), acc[c]);
    }
    for (int c = 0; c < C; ++c) simde_mm512_storeu_ps(out + static_cast<size_t>(c) * out_stride, acc[c]);
  }
};

// Q6_K: from 6 columns (in the sixteen-row layout, any), sixteen rows at a time, then
// DotQ6KRows4 (and its AVX2 kernel below kMinColumns columns) for the rest, all with the
// same bits. On a Zen 4, sixteen rows through transposes were faster
// from 8 columns (in cache and from DRAM), level at 6, and not faster at 4-5
// (docs/PERFORMANCE.md, stop 52).
template <int kMinColumns, Layout L = Layout::kFile>
using DotQ6K = SixteenRowsThen<DotQ6KRows16, DotQ6KRows4<kMinColumns>, 6, L>;

// Q3_K with sixteen rows per register, one per 32-bit lane, the bits of DotQ3KRow: per
// 16-byte piece l0..l0+15 of qs[32h..] and of hmask, dword t holds elements l0 + 4t..+3 of
// the four sub-blocks 8h + 2j + l0 / 16, j = 0-3, whose codes (stored +4) are bits 2j..2j+1
// of the qs bytes plus 4 x bit 4h + j of the hmask bytes. Four vpdpbusd take a sub-block's
// 16 elements into part (|part| <= 16 x 7 x 128), vpmulld multiplies it by the sub-block's
// signed scale, and the +4 comes off as -4 x sum_k(scale_k x bsums_k), one vpdpwssd per
// two sub-blocks: each row's block total is DotQ3KRow's exact integer, multiplied as it does,
// fma(total, d x a.d, acc).
struct DotQ3KRows16 {
  using Block = BlockQ3_K;
  // Every line, also for one column: from DRAM, Q3_K's rows of 768 streamed 0.86-0.93 of
  // the read probe so, and 0.47-0.52 with one line in 256 bytes (docs/PERFORMANCE.md, stop 57).
  static constexpr size_t kOneColumnPrefetchStep = 64;

  template <int C, typename Sixteen>
  static void group(int64_t n, const Sixteen& x, size_t row_bytes, const BlockQ8_K* const (&a)[C], float* out, size_t out_stride) {
    V512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = simde_mm512_setzero_ps();
    const V512i m2 = simde_mm512_set1_epi8(3), m4 = simde_mm512_set1_epi8(0x0F), m48 = simde_mm512_set1_epi8(0x30);
    const V512i four = simde_mm512_set1_epi8(4), byte0 = simde_mm512_set1_epi32(0xFF), bias = simde_mm512_set1_epi32(32);
    for (int64_t b = 0; b < n / 256; ++b) {
      x.prefetch(b, row_bytes);
      // The 16 bytes that end with the scales (the block's last field but d): dwords 1-3 are
      // the packed scales u0, u1, u2.
      V512i packed[4];
      x.dwords(b, offsetof(Block, scales) - 4, 0, packed);
      V512i scale[16];  // -32..31 in 32 bits
      for (int g = 0; g < 4; ++g) {
        // Scales 4g..4g+3 as the bytes of one dword (+32): low nibbles of u0, u1, u0 >> 4,
        // u1 >> 4; bits 2g..2g+1 of u2's bytes on top.
        const V512i low = simde_mm512_and_si512(g < 2 ? packed[1 + g] : simde_mm512_srli_epi32(packed[g - 1], 4), m4);
        const V512i high = simde_mm512_and_si512(g < 2 ? simde_mm512_slli_epi32(packed[3], 4 - 2 * g) : simde_mm512_srli_epi32(packed[3], 2 * g - 4), m48);
        const V512i four_scales = simde_mm512_or_si512(low, high);
        for (int m = 0; m < 4; ++m) {
          const V512i byte = m == 3 ? simde_mm512_srli_epi32(four_scales, 24) : simde_mm512_and_si512(simde_mm512_srli_epi32(four_scales, 8 * m), byte0);
          scale[4 * g + m] = simde_mm512_sub_epi32(byte, bias);
        }
      }
      V512i total[C];
      for (int c = 0; c < C; ++c) total[c] = simde_mm512_setzero_si512();
      take_off_code_offset<2>(total, scale, a, b);
      for (int p = 0; p < 2; ++p) {
        V512i high_bits[4];
        x.dwords(b, offsetof(Block, hmask), 16 * p, high_bits);
        for (int h = 0; h < 2; ++h) {
          V512i bits[4];
          x.dwords(b, offsetof(Block, qs) + 32 * h, 16 * p, bits);
          for (int j = 0; j < 4; ++j) {
            const V512i third_bit = simde_mm512_set1_epi8(static_cast<char>(1 << (4 * h + j)));
            V512i part[C];
            for (int c = 0; c < C; ++c) part[c] = simde_mm512_setzero_si512();
            for (int t = 0; t < 4; ++t) {
              V512i q = simde_mm512_and_si512(j == 0 ? bits[t] : simde_mm512_srli_epi16(bits[t], 2 * j), m2);
              q = simde_mm512_mask_add_epi8(q, simde_mm512_test_epi8_mask(high_bits[t], third_bit), q, four);
              for (int c = 0; c < C; ++c) part[c] = dot_bytes(part[c], q, a[c][b].qs + 128 * h + 32 * j + 16 * p + 4 * t);
            }
            const V512i s = scale[8 * h + 2 * j + p];
            for (int c = 0; c < C; ++c) total[c] = simde_mm512_add_epi32(total[c], simde_mm512_mullo_epi32(part[c], s));
          }
        }
      }
      const V512 d = x.f16(b, offsetof(Block, d));
      for (int c = 0; c < C; ++c) acc[c] = simde_mm512_fmadd_ps(to_float(total[c]), simde_mm512_mul_ps(d, simde_mm512_set1_ps(a[c][b].d)), acc[c]);
    }
    for (int c = 0; c < C; ++c) simde_mm512_storeu_ps(out + static_cast<size_t>(c) * out_stride, acc[c]);
  }
};

// Q2_K with sixteen rows per register, one per 32-bit lane, the bits of DotQ2KRows4: per
// 16-byte piece l0..l0+15 of qs[32h..], dword t holds elements l0 + 4t..+3 of the four
// sub-blocks 8h + 2j + l0 / 16, j = 0-3, whose codes (0-3) are bits 2j..2j+1. Four vpdpbusd
// take a sub-block's 16 elements into part (|part| <= 16 x 3 x 128), vpmulld multiplies it
// by the sub-block's scale (0-15) into sum, and min_sum takes one vpdpwssd per two
// sub-blocks, their (min, min) 16-bit pairs against the bsums. Then add_block, per row.
struct DotQ2KRows16 {
  using Block = BlockQ2_K;
  static constexpr size_t kOneColumnPrefetchStep = 64;  // see PackedRows16

  template <int C, typename Sixteen>
  static void group(int64_t n, const Sixteen& x, size_t row_bytes, const BlockQ8_K* const (&a)[C], float* out, size_t out_stride) {
    V512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = simde_mm512_setzero_ps();
    const V512i m3 = simde_mm512_set1_epi8(3), m4 = simde_mm512_set1_epi8(0x0F), low4 = simde_mm512_set1_epi32(0x0F);
    for (int64_t b = 0; b < n / 256; ++b) {
      x.prefetch(b, row_bytes);
      // Dword g: sub-blocks 4g..4g+3, a byte each, the scale in its low nibble and the min in its high.
      V512i packed[4];
      x.dwords(b, offsetof(Block, scales), 0, packed);
      V512i sum[C], min_sum[C];
      for (int c = 0; c < C; ++c) sum[c] = min_sum[c] = simde_mm512_setzero_si512();
      for (int g = 0; g < 4; ++g) {
        const V512i mins = simde_mm512_and_si512(simde_mm512_srli_epi32(packed[g], 4), m4);
        for (int i = 0; i < 2; ++i) {
          // (min_4g+2i, min_4g+2i+1) as 16-bit pairs against (bsums 4g + 2i, 4g + 2i + 1).
          const V512i pair = byte_pair(mins, i);
          for (int c = 0; c < C; ++c) min_sum[c] = dot_pairs(min_sum[c], pair, a[c][b].bsums + 4 * g + 2 * i);
        }
      }
      for (int h = 0; h < 2; ++h) {
        for (int p = 0; p < 2; ++p) {
          V512i bits[4];
          x.dwords(b, offsetof(Block, qs) + 32 * h, 16 * p, bits);
          for (int j = 0; j < 4; ++j) {
            V512i part[C];
            for (int c = 0; c < C; ++c) part[c] = simde_mm512_setzero_si512();
            for (int t = 0; t < 4; ++t) {
              const V512i q = simde_mm512_and_si512(j == 0 ? bits[t] : simde_mm512_srli_epi16(bits[t], 2 * j), m3);
              for (int c = 0; c < C; ++c) part[c] = dot_bytes(part[c], q, a[c][b].qs + 128 * h + 32 * j + 16 * p + 4 * t);
            }
            const int k = 8 * h + 2 * j + p;
            const V512i scale = simde_mm512_and_si512(simde_mm512_srli_epi32(packed[k / 4], 8 * (k % 4)), low4);
            for (int c = 0; c < C; ++c) sum[c] = simde_mm512_add_epi32(sum[c], simde_mm512_mullo_epi32(part[c], scale));
          }
        }
      }
      const V512 d = x.f16(b, offsetof(Block, d)), dmin = x.f16(b, offsetof(Block, dmin));
      for (int c = 0; c < C; ++c) acc[c] = add_block(acc[c], sum[c], min_sum[c], d, dmin, a[c][b].d);
    }
    for (int c = 0; c < C; ++c) simde_mm512_storeu_ps(out + static_cast<size_t>(c) * out_stride, acc[c]);
  }
};

// Q2_K: from 2 columns (in the sixteen-row layout, any), sixteen rows at a time, then four
// at a time (DotQ2KRows4) for the rest, all with the same bits: in the file layout, at 2-8
// columns 1.1-1.6x as fast as four at a time on a Zen 4 (docs/PERFORMANCE.md, stop 57).
template <Layout L = Layout::kFile>
using DotQ2K = SixteenRowsThen<DotQ2KRows16, DotQ2KRows4, 2, L>;

// Q3_K: from 2 columns (in the sixteen-row layout, any), sixteen rows at a time, then one
// at a time (DotQ3KRow) for the rest, all with the same bits: in the file layout, at 2-4
// columns 1.4-1.7x as fast as one at a time on a Zen 4; at one column the transposes were
// slower from DRAM (docs/PERFORMANCE.md, stop 57).
template <Layout L = Layout::kFile>
using DotQ3K = SixteenRowsThen<DotQ3KRows16, DotQ3KRow, 2, L>;

// The two sets (dot.h, Avx512Set): full-width 512-bit units (Zen 5, Intel) or units split
// in two 256-bit halves (Zen 4). The kernels and their bits are the same in both; what
// differs is which of them decode takes, one layout, and one prefetch step. Matvec,
// 2 threads, share of the read probe in the same passes:
// - Q4_K and Q5_K take four rows per register for one column (decode) too, in the file
//   layout. On a Zen 5 that gives Q4_K 0.81-0.85 against the AVX2 row pairs' 0.70, Q5_K
//   0.81-0.88 against 0.62; on a Zen 4, Q4_K 0.79-0.88 against 0.64-0.79 where the probe
//   read about 60 GB/s (stop 51).
// - Q6_K: on a Zen 5 four rows give up to 1.0 against 0.61-0.65. On a Zen 4 its four-row
//   kernel streamed 0.56-0.61 of a fast probe against the AVX2 kernel's 0.64-0.75, so
//   there one column goes to the AVX2 kernel (kMinCols 2).
// - The four-row layout (rows4_layout.h) for rows shorter than kLongRowCols only, for Q8_0
//   and IQ4_XS, and for Q4_0 with split units; for every row with the other 32-element
//   formats. On a Zen 4 with the probe at about 60 GB/s, rows of 4096: Q4_0 49-51 GB/s in
//   the file layout against 41-45 in this one (stop 51).
// - Q2_K-Q6_K in the sixteen-row layout, rows of any length. On a Zen 4, Q4_K decode
//   streamed 0.87-0.91 of the probe against the file layout's 0.72-0.85, and prompts ran
//   1.1-1.2x faster than with the transposes (stop 53); Q6_K's decode, with every line
//   prefetched, streamed about what the AVX2 kernel does (0.86-0.93 of slow probes against
//   0.93-0.97), and its prompts ran 1.3x as fast; Q2_K's decode streamed 29-36 GB/s against
//   the four-row layout's 24-28, and its prompts ran 1.9x as fast; Q3_K's decode 0.81-0.94
//   against 0.67-0.80, its prompts 1.6-1.7x as fast (stop 57). On an Intel Xeon (Emerald
//   Rapids) Q4_K's and Q5_K's prompts ran 1.4x as fast as in the four-row layout (stop 59).
//   On a Zen 5, against the four-row layout that Zen 5 took before: decode of Q6_K
//   0.9-1.1 of the probe against 0.7-0.8, of Q4_K and Q5_K 0.9-1.0 against 0.8-0.9;
//   prompts of Q4_K 1.1x, Q6_K 1.2x as fast; qwen3-30b-a3b's 691-token prompt 1.16x and
//   its decode 1.15x as fast (medians; stop 60).
// - The sixteen-row layout's prefetch for one column: with full-width units every line
//   (kQ45KOneColumnStep 64), with split units one line in 256 bytes, which was faster on a
//   Zen 4 (stop 53; PackedRows16). On a Zen 5 every line streamed Q4_K's 4096-element rows
//   at 0.78-0.96 of the probe against 0.49-0.66 (stop 60).
// (docs/PERFORMANCE.md, "Zen 4 again: which decode kernels and layouts pay", "Zen 4: Q4_K
// and Q5_K in sixteen-row groups", "Zen 4: Q3_K, Q6_K and Q2_K in sixteen-row groups",
// "Intel Xeon: a third AVX-512 set", "Zen 5: one set for full-width units", and the Zen 5
// sections.)
template <Avx512Set kSet>
KernelSet make_avx512(const char* name) {
  constexpr bool kFullWidth = kSet != Avx512Set::kSplitUnits;
  constexpr size_t kQ45KOneColumnStep = kSet == Avx512Set::kSplitUnits ? 256 : 64;
  KernelSet s = *avx2_kernels();
  s.name = name;
  auto set = [&](Type t, DotKernel k) { s.dot[static_cast<uint32_t>(t)] = k; };
  set(Type::Q4_K, entry<DotQ45K<false>>);
  set(Type::Q5_K, entry<DotQ45K<true>>);
  set(Type::Q6_K, entry<DotQ6K<kFullWidth ? 1 : 2>>);
  set(Type::Q2_K, entry<DotQ2K<>>);
  set(Type::Q3_K, entry<DotQ3K<>>);
  set(Type::IQ4_XS, entry<DotIQ4XSRows4<>>);
  set(Type::Q4_0, entry<Dot32Rows4<Rows4Q4_0>>);
  set(Type::Q4_1, entry<Dot32Rows4<Rows4Q4_1>>);
  set(Type::Q5_0, entry<Dot32Rows4<Rows4Q5_0>>);
  set(Type::Q5_1, entry<Dot32Rows4<Rows4Q5_1>>);
  set(Type::Q8_0, entry<Dot32Rows4<Rows4Q8_0>>);
  set(Type::IQ4_NL, entry<Dot32Rows4<Rows4IQ4_NL>>);
  set(Type::MXFP4, entry<Dot32Rows4<Rows4MXFP4>>);
  constexpr int64_t kAnyRow = INT64_MAX;
  auto set_rows4 = [&](Type t, DotKernel k, int64_t below_cols, int group_rows = 4) {
    s.dot_rows4[static_cast<uint32_t>(t)] = k;
    s.rows4_below_cols[static_cast<uint32_t>(t)] = below_cols;
    s.group_rows[static_cast<uint32_t>(t)] = group_rows;
  };
  set_rows4(Type::Q4_0, entry<Dot32Rows4<Rows4Q4_0, true>>, kFullWidth ? kAnyRow : kLongRowCols);
  set_rows4(Type::Q4_1, entry<Dot32Rows4<Rows4Q4_1, true>>, kAnyRow);
  set_rows4(Type::Q5_0, entry<Dot32Rows4<Rows4Q5_0, true>>, kAnyRow);
  set_rows4(Type::Q5_1, entry<Dot32Rows4<Rows4Q5_1, true>>, kAnyRow);
  set_rows4(Type::Q8_0, entry<Dot32Rows4<Rows4Q8_0, true>>, kLongRowCols);
  set_rows4(Type::IQ4_NL, entry<Dot32Rows4<Rows4IQ4_NL, true>>, kAnyRow);
  set_rows4(Type::MXFP4, entry<Dot32Rows4<Rows4MXFP4, true>>, kAnyRow);
  // IQ4_XS's kernel takes every column count in every set
  set_rows4(Type::IQ4_XS, entry<DotIQ4XSRows4<true>>, kLongRowCols);
  set_rows4(Type::Q2_K, entry<DotQ2K<Layout::kRows16>>, kAnyRow, 16);
  set_rows4(Type::Q3_K, entry<DotQ3K<Layout::kRows16>>, kAnyRow, 16);
  set_rows4(Type::Q4_K, entry<DotQ45K<false, Layout::kRows16, kQ45KOneColumnStep>>, kAnyRow, 16);
  set_rows4(Type::Q5_K, entry<DotQ45K<true, Layout::kRows16, kQ45KOneColumnStep>>, kAnyRow, 16);
  set_rows4(Type::Q6_K, entry<DotQ6K<kFullWidth ? 1 : 2, Layout::kRows16>>, kAnyRow, 16);
  set(Type::F32, entry<DotFloat<LoadF32, Floats16>>);
  set(Type::F16, entry<DotFloat<LoadF16, Floats16>>);
  set(Type::BF16, entry<DotFloat<LoadBF16, Floats16>>);
  return s;
}

// Each set's name (dot.h), in Avx512Set's order.
#if defined(EPQ_AVX512_EMULATED)
constexpr const char* kNames[] = {"avx512-emulated", "avx512-full-width-emulated"};
#else
constexpr const char* kNames[] = {"avx512", "avx512-full-width"};
#endif

// Each set once.
template <Avx512Set kSet>
const KernelSet& the_set() {
  static const KernelSet s = make_avx512<kSet>(kNames[static_cast<int>(kSet)]);
  return s;
}

const KernelSet& set_of(Avx512Set which) {
  return which == Avx512Set::kSplitUnits ? the_set<Avx512Set::kSplitUnits>() : the_set<Avx512Set::kFullWidth>();
}

}  // namespace

#if defined(EPQ_AVX512_EMULATED)
const KernelSet& avx512_kernels_emulated(Avx512Set which) { return set_of(which); }
#else
const KernelSet& avx512_kernels_unchecked(Avx512Set which) { return set_of(which); }
#endif

}  // namespace epq::quant
