#include "quant/reference.h"

#include <cstring>

#include "quant/float_bits.h"
#include "util/error.h"

namespace epq::quant {

void quantize_row(Type type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case Type::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case Type::F16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
      return;
    case Type::BF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
      return;
    case Type::Q4_0: case Type::Q4_1: case Type::Q5_0: case Type::Q5_1: case Type::Q8_0:
    case Type::IQ4_NL: case Type::MXFP4:
      quantize_blocks32(type, src, dst, n);
      return;
    case Type::Q2_K: case Type::Q3_K: case Type::Q4_K: case Type::Q5_K: case Type::Q6_K:
    case Type::Q8_K: case Type::IQ4_XS:
      quantize_blocks256(type, src, dst, n);
      return;
    default:
      fail("cannot quantize to {}: type not supported", name(type));
  }
}

void dequantize_row(Type type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case Type::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case Type::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case Type::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case Type::Q4_0: case Type::Q4_1: case Type::Q5_0: case Type::Q5_1: case Type::Q8_0:
    case Type::IQ4_NL: case Type::MXFP4:
      dequantize_blocks32(type, src, dst, n);
      return;
    case Type::Q2_K: case Type::Q3_K: case Type::Q4_K: case Type::Q5_K: case Type::Q6_K:
    case Type::Q8_K: case Type::IQ4_XS:
      dequantize_blocks256(type, src, dst, n);
      return;
    default:
      fail("cannot dequantize {}: type not supported", name(type));
  }
}

}  // namespace epq::quant
