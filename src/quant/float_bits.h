#pragma once
// Scalar conversions between float and the 16-bit and 8-bit float encodings in GGUF
// blocks: IEEE half (F16), bfloat16 (BF16) and the E8M0 power-of-two scale of MXFP4.
#include <immintrin.h>

#include <bit>
#include <cstdint>

namespace epq::quant {

inline float f16_to_f32(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }
// Round to nearest even, as IEEE conversion does.
inline uint16_t f32_to_f16(float f) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}

inline float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }
// Round to nearest even; NaNs stay NaN (quiet bit forced so truncation cannot make Inf).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 64);
  return static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

// MXFP4 scale: the E8M0 exponent e encodes 2^(e-127). The MXFP4 code book stores values
// doubled (integers 0..12), so blocks are decoded with half the scale: 2^(e-128).
inline float e8m0_to_f32_half(uint8_t e) {
  uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t{e} - 1) << 23;
  return std::bit_cast<float>(bits);
}

}  // namespace epq::quant
