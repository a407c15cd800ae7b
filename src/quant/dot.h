#pragma once
// Dot-product kernels: a run of weight rows against up to kMaxCols activation vectors,
// each in the activation format of the weight type (see activation.h). A kernel set holds one
// kernel per supported type for one instruction set; the active set is chosen once,
// at first use, from the CPU's features (or EPQ_KERNELS, a set's name: scalar, avx2,
// avx512 or avx512-full-width).
#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace epq::quant {

inline constexpr int kMaxCols = 8;

// out[c * out_stride + r] = dot(row r, column c) for r in [0, n_rows), c in [0, n_cols):
// row r (n weights) at w + r * row_bytes, column c at act + c * act_stride. A row's
// result is the same whichever rows share the call, and a column's whichever columns
// share it, one alone included: a token's numbers must not depend on its batch.
using DotKernel = void (*)(int64_t n, const void* w, size_t row_bytes, int64_t n_rows, const void* act, size_t act_stride,
                           int n_cols, float* out, size_t out_stride);

struct KernelSet {
  const char* name;
  DotKernel dot[64];  // indexed by type id; null for unsupported types
  // The same products for weights in the four-row layout (quant/rows4_layout.h) or its
  // sixteen-row variant (group_rows): w at the first row of a group, n_rows rows of which
  // all but the last n_rows % group_rows are in groups.
  // Null for the types and sets without one.
  DotKernel dot_rows4[64];
  // Matrices of a type with dot_rows4 go to that layout where their rows are shorter than
  // this many elements: with long rows some formats stream faster in the file layout.
  int64_t rows4_below_cols[64];
  // Rows in a group of that layout: 4, or 16 in its sixteen-row variant.
  int group_rows[64];
};

const KernelSet& scalar_kernels();            // the oracle: dequantize and sum in double
const KernelSet* avx2_kernels();              // null if the CPU lacks AVX2/FMA/F16C
const KernelSet* avx512_kernels();            // this CPU's AVX-512 set; null if it lacks AVX-512 (F, BW, VL, DQ, VNNI)
const KernelSet& active_kernels();
// Whether `set` is one of the AVX-512 sets (so the CPU has AVX-512).
bool is_avx512(const KernelSet& set);

// The AVX-512 sets. Their kernels give the same bits; they differ in the kernels, layouts and
// prefetching decode takes, chosen by measurement on each kind of CPU (dot_avx512.cpp,
// make_avx512):
// - kSplitUnits, `avx512`: 512-bit units split in two 256-bit halves (AMD Zen 4);
// - kFullWidth, `avx512-full-width`: full-width units (AMD Zen 5, Intel).
enum class Avx512Set { kSplitUnits, kFullWidth };
// Without the CPU check: their code must not run on a CPU without AVX-512 (avx512_kernels
// checks first).
const KernelSet& avx512_kernels_unchecked(Avx512Set which);
// The same sets built on SIMDe's emulation of the instructions, which any AVX2 CPU can
// run. Linked into the unit tests only (tests/CMakeLists.txt).
const KernelSet& avx512_kernels_emulated(Avx512Set which);

inline DotKernel dot_kernel(const KernelSet& set, Type t) { return set.dot[static_cast<uint32_t>(t)]; }
inline DotKernel dot_kernel_rows4(const KernelSet& set, Type t) { return set.dot_rows4[static_cast<uint32_t>(t)]; }

}  // namespace epq::quant
