#pragma once
// Activations in the form a weight type's dot kernel reads. Integer kernels want int8
// blocks with a float scale; float weights read floats: unchanged for F32, rounded to F16
// or BF16 precision for F16 and BF16 weights, as ggml's dot types do (llama.cpp's
// numbers on such files are then matched as closely as it matches itself). An activation
// vector is quantized once and shared by every matrix that reads it.
#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace epq::quant {

enum class ActFormat {
  kF32,   // plain floats: F32 weights
  kQ8x32, // BlockQ8x32: the 32-element formats
  kQ8K,   // BlockQ8_K: the 256-element formats
  kF16,   // floats rounded to F16 (nearest even): F16 weights, as ggml's F16 dot type does
  kBF16,  // floats rounded to BF16 (nearest even): BF16 weights, as ggml's BF16 dot type does;
          // each whole block of 32 stored as its 16 even elements, then its 16 odd ones
          // (the pairs the kernels read BF16 weights in, DotFloat), the n % 32 last in order
};
inline constexpr int kActFormatCount = 5;

struct BlockQ8x32 {
  float d;  // scale: x ~ d * qs
  float s;  // d * sum(qs), for formats with an offset or minimum
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8x32) == 40);

ActFormat activation_format(Type weight_type);
// Bytes of one quantized activation vector of n elements (n a multiple of the block).
size_t activation_bytes(ActFormat format, int64_t n);

// The quantizer every kernel's input comes from (AVX2). Round to nearest even, scale
// amax/127; a zero block gets scale 0.
void quantize_activation(ActFormat format, const float* x, void* out, int64_t n);
// Scalar twin of quantize_activation; must produce identical bytes (tested).
void quantize_activation_reference(ActFormat format, const float* x, void* out, int64_t n);
// Decodes an activation vector (for reference kernels and tests).
void dequantize_activation(ActFormat format, const void* in, float* out, int64_t n);

}  // namespace epq::quant
