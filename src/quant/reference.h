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

// One block of a 32-element format (Q4_0 .. Q8_0, IQ4_NL, MXFP4; reference_blocks32.cpp)
// or a 256-element one (Q2_K .. Q8_K, IQ4_XS; reference_blocks256.cpp).
void quantize_block32(Type type, const float* x, uint8_t* out);
void dequantize_block32(Type type, const uint8_t* in, float* y);
void quantize_block256(Type type, const float* x, uint8_t* out);
void dequantize_block256(Type type, const uint8_t* in, float* y);

}  // namespace epq::quant
