#include "quant/reference.h"

#include <cstring>

#include "quant/float_bits.h"
#include "util/error.h"

namespace epq::quant {

namespace {

// The block size of a quantized type EPQ supports; fails for others.
const TypeInfo& block_type(Type type, const char* what) {
  const TypeInfo& t = info(type);
  if (!t.supported || t.block_elems == 1) fail("cannot {} {}: type not supported", what, name(type));
  return t;
}

}  // namespace

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
    default:
      break;
  }
  const TypeInfo& t = block_type(type, "quantize to");
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / t.block_elems; ++b) {
    (t.block_elems == kQK ? quantize_block32 : quantize_block256)(type, src + b * t.block_elems, out + b * t.block_bytes);
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
    default:
      break;
  }
  const TypeInfo& t = block_type(type, "dequantize");
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / t.block_elems; ++b) {
    (t.block_elems == kQK ? dequantize_block32 : dequantize_block256)(type, in + b * t.block_bytes, dst + b * t.block_elems);
  }
}

}  // namespace epq::quant
