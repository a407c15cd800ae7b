#pragma once
// Scalar reference codecs for every supported type: the oracle that SIMD kernels and
// other tools are checked against. Quantization is plain round-to-nearest (no importance
// matrix); dequantization follows the block layouts bit for bit.
#include <cstdint>

#include "quant/types.h"

namespace epq::quant {

// n must be a multiple of the type's block size; dst holds row_bytes(type, n) bytes.
void quantize_row(Type type, const float* src, void* dst, int64_t n);
void dequantize_row(Type type, const void* src, float* dst, int64_t n);

// Per-format entry points, used by the dispatchers above.
void quantize_blocks32(Type type, const float* src, void* dst, int64_t n);
void dequantize_blocks32(Type type, const void* src, float* dst, int64_t n);
void quantize_blocks256(Type type, const float* src, void* dst, int64_t n);
void dequantize_blocks256(Type type, const void* src, float* dst, int64_t n);

}  // namespace epq::quant
