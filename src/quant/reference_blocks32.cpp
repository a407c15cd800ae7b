// Reference codecs of the 32-element formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4.
// In every 4-bit layout the low nibble of qs[j] is element j and the high nibble is j+16.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/float_bits.h"
#include "quant/reference.h"
#include "util/error.h"

namespace epq::quant {
namespace {

// The element of largest magnitude, with its sign.
float signed_absmax(const float* x, int n) {
  float best = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  }
  return best;
}

int clamp_round(float v, int lo, int hi) {
  return std::clamp(static_cast<int>(std::nearbyint(v)), lo, hi);
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Index of the code-book entry nearest to v (values are in code-book units).
int nearest_code(const int8_t* book, float v) {
  int best = 0;
  for (int i = 1; i < 16; ++i) {
    if (std::fabs(v - book[i]) < std::fabs(v - book[best])) best = i;
  }
  return best;
}

void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

// 5-bit values: low nibbles to qs, bit 4 of element j to bit j of qh (little endian).
void pack_5bit(const int* q, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < 32; ++j) high |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  int low[32];
  for (int j = 0; j < 32; ++j) low[j] = q[j] & 0xF;
  pack_nibbles(low, qs);
  std::memcpy(qh, &high, 4);
}

void unpack_5bit(const uint8_t* qs, const uint8_t* qh, int* q) {
  uint32_t high = load_u32(qh);
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 0xF) | static_cast<int>(((high >> j) << 4) & 0x10);
    q[j + 16] = (qs[j] >> 4) | static_cast<int>((high >> (j + 12)) & 0x10);
  }
}

}  // namespace

void quantize_block32(Type type, const float* x, uint8_t* out) {
  int q[32];
  switch (type) {
    case Type::Q4_0: {
      auto* b = reinterpret_cast<BlockQ4_0*>(out);
      b->d = f32_to_f16(signed_absmax(x, 32) / -8);
      float d = f16_to_f32(b->d), id = d != 0 ? 1 / d : 0;
      for (int j = 0; j < 32; ++j) q[j] = clamp_round(x[j] * id + 8, 0, 15);
      pack_nibbles(q, b->qs);
      return;
    }
    case Type::Q5_0: {
      auto* b = reinterpret_cast<BlockQ5_0*>(out);
      b->d = f32_to_f16(signed_absmax(x, 32) / -16);
      float d = f16_to_f32(b->d), id = d != 0 ? 1 / d : 0;
      for (int j = 0; j < 32; ++j) q[j] = clamp_round(x[j] * id + 16, 0, 31);
      pack_5bit(q, b->qs, b->qh);
      return;
    }
    case Type::Q4_1:
    case Type::Q5_1: {
      const int levels = type == Type::Q4_1 ? 15 : 31;
      float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
      uint16_t d16 = f32_to_f16((hi - lo) / static_cast<float>(levels)), m16 = f32_to_f16(lo);
      float d = f16_to_f32(d16), m = f16_to_f32(m16), id = d != 0 ? 1 / d : 0;
      for (int j = 0; j < 32; ++j) q[j] = clamp_round((x[j] - m) * id, 0, levels);
      if (type == Type::Q4_1) {
        auto* b = reinterpret_cast<BlockQ4_1*>(out);
        b->d = d16, b->m = m16;
        pack_nibbles(q, b->qs);
      } else {
        auto* b = reinterpret_cast<BlockQ5_1*>(out);
        b->d = d16, b->m = m16;
        pack_5bit(q, b->qs, b->qh);
      }
      return;
    }
    case Type::Q8_0: {
      auto* b = reinterpret_cast<BlockQ8_0*>(out);
      b->d = f32_to_f16(std::fabs(signed_absmax(x, 32)) / 127);
      float d = f16_to_f32(b->d), id = d != 0 ? 1 / d : 0;
      for (int j = 0; j < 32; ++j) b->qs[j] = static_cast<int8_t>(clamp_round(x[j] * id, -127, 127));
      return;
    }
    case Type::IQ4_NL: {
      auto* b = reinterpret_cast<BlockIQ4_NL*>(out);
      b->d = f32_to_f16(signed_absmax(x, 32) / kIQ4NLValues[0]);
      float d = f16_to_f32(b->d), id = d != 0 ? 1 / d : 0;
      for (int j = 0; j < 32; ++j) q[j] = nearest_code(kIQ4NLValues, x[j] * id);
      pack_nibbles(q, b->qs);
      return;
    }
    case Type::MXFP4: {
      auto* b = reinterpret_cast<BlockMXFP4*>(out);
      float amax = std::fabs(signed_absmax(x, 32));
      // Largest code is 6 = 12/2: choose 2^(e-127) so that amax/scale lies in [4, 8).
      int e = amax > 0 ? static_cast<int>(std::floor(std::log2(amax))) - 2 + 127 : 0;
      b->e = static_cast<uint8_t>(std::clamp(e, 0, 254));
      float d = e8m0_to_f32_half(b->e);
      for (int j = 0; j < 32; ++j) q[j] = nearest_code(kMXFP4Values, x[j] / d);
      pack_nibbles(q, b->qs);
      return;
    }
    default:
      fail("internal: {} is not a 32-element format", name(type));
  }
}

void dequantize_block32(Type type, const uint8_t* in, float* y) {
  int q[32];
  switch (type) {
    case Type::Q4_0: {
      auto* b = reinterpret_cast<const BlockQ4_0*>(in);
      float d = f16_to_f32(b->d);
      for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>((b->qs[j] & 0xF) - 8) * d;
        y[j + 16] = static_cast<float>((b->qs[j] >> 4) - 8) * d;
      }
      return;
    }
    case Type::Q4_1: {
      auto* b = reinterpret_cast<const BlockQ4_1*>(in);
      float d = f16_to_f32(b->d), m = f16_to_f32(b->m);
      for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(b->qs[j] & 0xF) * d + m;
        y[j + 16] = static_cast<float>(b->qs[j] >> 4) * d + m;
      }
      return;
    }
    case Type::Q5_0: {
      auto* b = reinterpret_cast<const BlockQ5_0*>(in);
      float d = f16_to_f32(b->d);
      unpack_5bit(b->qs, b->qh, q);
      for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
      return;
    }
    case Type::Q5_1: {
      auto* b = reinterpret_cast<const BlockQ5_1*>(in);
      float d = f16_to_f32(b->d), m = f16_to_f32(b->m);
      unpack_5bit(b->qs, b->qh, q);
      for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q[j]) * d + m;
      return;
    }
    case Type::Q8_0: {
      auto* b = reinterpret_cast<const BlockQ8_0*>(in);
      float d = f16_to_f32(b->d);
      for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b->qs[j]) * d;
      return;
    }
    case Type::IQ4_NL: {
      auto* b = reinterpret_cast<const BlockIQ4_NL*>(in);
      float d = f16_to_f32(b->d);
      for (int j = 0; j < 16; ++j) {
        y[j] = d * kIQ4NLValues[b->qs[j] & 0xF];
        y[j + 16] = d * kIQ4NLValues[b->qs[j] >> 4];
      }
      return;
    }
    case Type::MXFP4: {
      auto* b = reinterpret_cast<const BlockMXFP4*>(in);
      float d = e8m0_to_f32_half(b->e);
      for (int j = 0; j < 16; ++j) {
        y[j] = kMXFP4Values[b->qs[j] & 0xF] * d;
        y[j + 16] = kMXFP4Values[b->qs[j] >> 4] * d;
      }
      return;
    }
    default:
      fail("internal: {} is not a 32-element format", name(type));
  }
}

}  // namespace epq::quant
