#pragma once
// The four-row layout of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL,
// MXFP4) and of IQ4_XS, and the sixteen-row layout of Q2_K-Q6_K, for weights in RAM on
// CPUs whose kernel set reads them (KernelSet::dot_rows4: the AVX-512 sets). Q8_0 and
// IQ4_XS only for rows shorter than kLongRowCols: with rows of 2048 elements Q8_0's file
// layout streamed 0.93-0.98 of the read probe and this one 0.82-0.88, with rows of 768
// 0.64-0.74 against 0.82-0.89; IQ4_XS's rows of 768 0.82-0.86 against 0.66-0.77 (at 4096
// columns its file layout gave 0.89-1.00, this one 0.85-0.87) (docs/PERFORMANCE.md, "Q8_0
// in the four-row layout" and "IQ4_XS with four rows per register"). On a Zen 4 (the set
// `avx512`, split 512-bit units) Q4_0's long rows stay in the file layout ("Zen 4 again:
// which decode kernels and layouts pay"). The K formats' rows of any length go to the
// sixteen-row layout ("Zen 4: Q4_K and Q5_K in sixteen-row groups", "Zen 4: Q3_K, Q6_K
// and Q2_K in sixteen-row groups", "Zen 5: one set for full-width units").
// Each kernel set says which rows it takes in this layout (KernelSet::rows4_below_cols).
//
// In a file, a matrix's rows follow one another, so a kernel that takes four or eight rows
// at a time reads as many streams of memory. In this layout rows go in groups of four, and
// each block index b of a group holds the four rows' block b field by field: for each field
// of the block in its order (d, m, qh, qs; MXFP4: e, qs; IQ4_XS's code field in pieces of
// 32 bytes, as its kernel reads them), the four rows' copies side by side. So
// field f (at byte `off` of a block, `size` bytes) of row i of the group is at
//   group + b * 4 * block_bytes + 4 * off + i * size,
// and a group is one stream, whose four scales and four code fields are each one load
// (32-byte code fields two).
// The rows after the last multiple of four stay as they are, after the groups. The bytes
// are the file's, rearranged: the same count, so the change is made in place.
//
// The sixteen-row variant (KernelSet::group_rows 16: Q2_K-Q6_K) serves kernels that hold
// one row per 32-bit lane.
// Rows go in groups of sixteen; block b of a group holds the sixteen rows' blocks b cut
// into pieces of 4 bytes (2 for the F16 fields: d and dmin, or d), each piece's sixteen
// copies side by side: the piece at byte o of row i's block (p bytes) is at
//   group + b * 16 * block_bytes + 16 * o + i * p,
// so that one 64-byte load gives a piece of every row, one per lane, and one 32-byte load
// an F16 field. The rows after the last multiple of sixteen stay as they are.
#include <cstddef>
#include <cstdint>

#include "quant/dot.h"
#include "quant/types.h"

namespace epq::quant {

// Whether type t has the layout in groups of group_rows rows (4, or 16 for the variant).
bool has_rows4_layout(Type t, int group_rows);

// Rows at least this long stay in the file layout for Q8_0 and IQ4_XS (on a Zen 4 also
// Q4_0): KernelSet::rows4_below_cols.
inline constexpr int64_t kLongRowCols = 2048;

// Whether matrices of type t with rows of `cols` elements are to be rearranged: t has the
// layout, the active kernel set reads it (AVX-512; on AVX2-only CPUs nothing is), and the
// rows are shorter than the set's rows4_below_cols for t.
bool use_rows4_layout(Type t, int64_t cols);

// Rearranges `rows` rows of `cols` elements of type t (has_rows4_layout), file layout at
// `data`, into the layout that `set` reads for t (four rows, or sixteen), in place:
// 0.26-0.33 ms for a 2.65 MB IQ4_NL expert not in the cache on Zen 5 (docs/PERFORMANCE.md,
// "Routed experts in the four-row layout"); sixteen rows of Q4_K and Q5_K at 7.5-11 GB/s on a
// Zen 4 (bench Rearrange/Q4_K, Rearrange/Q5_K).
void to_rows4_layout(Type t, uint8_t* data, int64_t rows, int64_t cols, const KernelSet& set = active_kernels());

}  // namespace epq::quant
