// Reference codecs of the 256-element formats: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_XS.
// Dequantizers follow the layouts loop for loop; quantizers compute integer codes in
// element order and pack them with the inverse of those loops. In every K format the
// scale of element i is that of sub-block i / (sub-block size).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/float_bits.h"
#include "quant/reference.h"
#include "util/error.h"

namespace epq::quant {

void unpack_q3_k_scales(const uint8_t packed[12], int8_t scales[16]) {
  for (int i = 0; i < 16; ++i) {
    int low = i < 8 ? packed[i] & 0xF : packed[i - 8] >> 4;
    int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    scales[i] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

namespace {

int clamp_round(float v, int lo, int hi) {
  return std::clamp(static_cast<int>(std::nearbyint(v)), lo, hi);
}

float signed_absmax(const float* x, int n) {
  float best = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  }
  return best;
}

float safe_inverse(float d) { return d != 0 ? 1 / d : 0; }

// Affine sub-block fit for the K formats with mins: x ~ scale*q - min, min >= 0.
struct AffineFit {
  float scale[16];
  float min[16];
};

AffineFit fit_affine(const float* x, int n_sub, int sub_size, int levels) {
  AffineFit fit{};
  for (int s = 0; s < n_sub; ++s) {
    const float* v = x + s * sub_size;
    float lo = std::min(0.0f, *std::min_element(v, v + sub_size));
    float hi = *std::max_element(v, v + sub_size);
    fit.scale[s] = (hi - lo) / static_cast<float>(levels);
    fit.min[s] = -lo;
  }
  return fit;
}

// Quantizes the affine fit's scales and mins against super-block d/dmin with
// `scale_levels` steps, then the elements against the rounded result. Returns codes.
void quantize_affine(const float* x, int n_sub, int sub_size, int levels, int scale_levels,
                     uint16_t* d16, uint16_t* dmin16, int* sc, int* mn, int* q) {
  AffineFit fit = fit_affine(x, n_sub, sub_size, levels);
  float max_scale = *std::max_element(fit.scale, fit.scale + n_sub);
  float max_min = *std::max_element(fit.min, fit.min + n_sub);
  *d16 = f32_to_f16(max_scale / static_cast<float>(scale_levels));
  *dmin16 = f32_to_f16(max_min / static_cast<float>(scale_levels));
  float d = f16_to_f32(*d16), dmin = f16_to_f32(*dmin16);
  for (int s = 0; s < n_sub; ++s) {
    sc[s] = clamp_round(fit.scale[s] * safe_inverse(d), 0, scale_levels);
    mn[s] = clamp_round(fit.min[s] * safe_inverse(dmin), 0, scale_levels);
    float step = d * static_cast<float>(sc[s]), offset = dmin * static_cast<float>(mn[s]);
    for (int i = 0; i < sub_size; ++i) {
      int k = s * sub_size + i;
      q[k] = clamp_round((x[k] + offset) * safe_inverse(step), 0, levels);
    }
  }
}

// Symmetric sub-block fit: sub-block s gets scale x_max/code_extreme; those scales are
// quantized to signed codes against one F16 super-block scale that maps the largest to
// scale_extreme; elements are then coded against the rounded result. Returns the F16 d.
uint16_t quantize_symmetric(const float* x, float code_extreme, int code_lo, int code_hi,
                            float scale_extreme, int scale_lo, int scale_hi, int* sc, int* q) {
  float scales[16];
  for (int s = 0; s < 16; ++s) scales[s] = signed_absmax(x + s * 16, 16) / code_extreme;
  uint16_t d16 = f32_to_f16(signed_absmax(scales, 16) / scale_extreme);
  float d = f16_to_f32(d16);
  for (int s = 0; s < 16; ++s) {
    sc[s] = clamp_round(scales[s] * safe_inverse(d), scale_lo, scale_hi);
    float step = d * static_cast<float>(sc[s]);
    for (int i = s * 16; i < s * 16 + 16; ++i) q[i] = clamp_round(x[i] * safe_inverse(step), code_lo, code_hi);
  }
  return d16;
}

int nearest_iq4(float v) {
  int best = 0;
  for (int i = 1; i < 16; ++i) {
    if (std::fabs(v - kIQ4NLValues[i]) < std::fabs(v - kIQ4NLValues[best])) best = i;
  }
  return best;
}

// 2-bit planes shared by Q2_K and Q3_K: element i -> byte (i/128)*32 + i%32, shift 2*((i%128)/32).
void pack_2bit_planes(const int* q, uint8_t* qs) {
  std::memset(qs, 0, 64);
  for (int i = 0; i < 256; ++i) {
    qs[(i / 128) * 32 + i % 32] |= static_cast<uint8_t>((q[i] & 3) << (2 * ((i % 128) / 32)));
  }
}

void pack_k4_scales(const int* sc, const int* mn, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
  }
}

// Q4_K/Q5_K nibbles: element i -> byte (i/64)*32 + i%32, high nibble when (i%64) >= 32.
void pack_k4_nibbles(const int* q, uint8_t* qs) {
  std::memset(qs, 0, 128);
  for (int i = 0; i < 256; ++i) {
    qs[(i / 64) * 32 + i % 32] |= static_cast<uint8_t>((q[i] & 0xF) << (4 * ((i % 64) / 32)));
  }
}

}  // namespace

void quantize_block256(Type type, const float* x, uint8_t* out) {
  int q[256], sc[16], mn[16];
  switch (type) {
    case Type::Q2_K: {
      auto* b = reinterpret_cast<BlockQ2_K*>(out);
      quantize_affine(x, 16, 16, 3, 15, &b->d, &b->dmin, sc, mn, q);
      for (int s = 0; s < 16; ++s) b->scales[s] = static_cast<uint8_t>(sc[s] | (mn[s] << 4));
      pack_2bit_planes(q, b->qs);
      return;
    }
    case Type::Q3_K: {
      auto* b = reinterpret_cast<BlockQ3_K*>(out);
      b->d = quantize_symmetric(x, -4, -4, 3, -32, -32, 31, sc, q);
      int u[256];
      for (int i = 0; i < 256; ++i) u[i] = q[i] + 4;
      pack_2bit_planes(u, b->qs);
      std::memset(b->hmask, 0, 32);
      for (int i = 0; i < 256; ++i) {
        if (u[i] & 4) b->hmask[i % 32] |= static_cast<uint8_t>(1 << (i / 32));
      }
      std::memset(b->scales, 0, 12);
      for (int i = 0; i < 16; ++i) {
        int v = sc[i] + 32;
        b->scales[i < 8 ? i : i - 8] |= static_cast<uint8_t>((v & 0xF) << (i < 8 ? 0 : 4));
        b->scales[8 + i % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (i / 4)));
      }
      return;
    }
    case Type::Q4_K: {
      auto* b = reinterpret_cast<BlockQ4_K*>(out);
      quantize_affine(x, 8, 32, 15, 63, &b->d, &b->dmin, sc, mn, q);
      pack_k4_scales(sc, mn, b->scales);
      pack_k4_nibbles(q, b->qs);
      return;
    }
    case Type::Q5_K: {
      auto* b = reinterpret_cast<BlockQ5_K*>(out);
      quantize_affine(x, 8, 32, 31, 63, &b->d, &b->dmin, sc, mn, q);
      pack_k4_scales(sc, mn, b->scales);
      pack_k4_nibbles(q, b->qs);
      std::memset(b->qh, 0, 32);
      for (int i = 0; i < 256; ++i) b->qh[i % 32] |= static_cast<uint8_t>(((q[i] >> 4) & 1) << (i / 32));
      return;
    }
    case Type::Q6_K: {
      auto* b = reinterpret_cast<BlockQ6_K*>(out);
      b->d = quantize_symmetric(x, -32, -32, 31, -128, -128, 127, sc, q);
      for (int s = 0; s < 16; ++s) b->scales[s] = static_cast<int8_t>(sc[s]);
      std::memset(b->ql, 0, 128);
      std::memset(b->qh, 0, 64);
      for (int i = 0; i < 256; ++i) q[i] += 32;
      for (int i = 0; i < 256; ++i) {
        int h = i / 128, g = (i % 128) / 32, l = i % 32;
        b->ql[h * 64 + (g & 1) * 32 + l] |= static_cast<uint8_t>((q[i] & 0xF) << (4 * (g >> 1)));
        b->qh[h * 32 + l] |= static_cast<uint8_t>((q[i] >> 4) << (2 * g));
      }
      return;
    }
    case Type::Q8_K: {
      auto* b = reinterpret_cast<BlockQ8_K*>(out);
      float amax = std::fabs(signed_absmax(x, 256));
      b->d = amax / 127;
      float id = safe_inverse(b->d);
      for (int i = 0; i < 256; ++i) b->qs[i] = static_cast<int8_t>(clamp_round(x[i] * id, -127, 127));
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += b->qs[g * 16 + i];
        b->bsums[g] = static_cast<int16_t>(sum);
      }
      return;
    }
    case Type::IQ4_XS: {
      auto* b = reinterpret_cast<BlockIQ4_XS*>(out);
      float scales[8];
      for (int s = 0; s < 8; ++s) scales[s] = signed_absmax(x + s * 32, 32) / kIQ4NLValues[0];
      b->d = f32_to_f16(signed_absmax(scales, 8) / -32);
      float d = f16_to_f32(b->d);
      b->scales_h = 0;
      std::memset(b->scales_l, 0, 4);
      for (int s = 0; s < 8; ++s) {
        int ls = clamp_round(scales[s] * safe_inverse(d), -32, 31) + 32;
        b->scales_l[s / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (s % 2)));
        b->scales_h = static_cast<uint16_t>(b->scales_h | ((ls >> 4) << (2 * s)));
        float step = d * static_cast<float>(ls - 32);
        for (int j = 0; j < 16; ++j) {
          int lo = nearest_iq4(x[s * 32 + j] * safe_inverse(step));
          int hi = nearest_iq4(x[s * 32 + j + 16] * safe_inverse(step));
          b->qs[s * 16 + j] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
      return;
    }
    default:
      fail("internal: {} is not a 256-element format", name(type));
  }
}

void dequantize_block256(Type type, const uint8_t* in, float* y) {
  switch (type) {
    case Type::Q2_K: {
      auto* b = reinterpret_cast<const BlockQ2_K*>(in);
      float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
      const uint8_t* q = b->qs;
      int is = 0;
      for (int half = 0; half < 2; ++half, q += 32) {
        for (int shift = 0; shift < 8; shift += 2) {
          for (int part = 0; part < 2; ++part) {
            uint8_t sc = b->scales[is++];
            float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
            for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
          }
        }
      }
      return;
    }
    case Type::Q3_K: {
      auto* b = reinterpret_cast<const BlockQ3_K*>(in);
      float d = f16_to_f32(b->d);
      int8_t scales[16];
      unpack_q3_k_scales(b->scales, scales);
      const uint8_t* q = b->qs;
      int is = 0, bit = 0;
      for (int half = 0; half < 2; ++half, q += 32) {
        for (int shift = 0; shift < 8; shift += 2, ++bit) {
          for (int part = 0; part < 2; ++part) {
            float dl = d * static_cast<float>(scales[is++]);
            for (int l = 16 * part; l < 16 * part + 16; ++l) {
              int v = ((q[l] >> shift) & 3) - ((b->hmask[l] >> bit) & 1 ? 0 : 4);
              *y++ = dl * static_cast<float>(v);
            }
          }
        }
      }
      return;
    }
    case Type::Q4_K:
    case Type::Q5_K: {
      const bool five = type == Type::Q5_K;
      auto* b4 = reinterpret_cast<const BlockQ4_K*>(in);
      auto* b5 = reinterpret_cast<const BlockQ5_K*>(in);
      float d = f16_to_f32(five ? b5->d : b4->d), dmin = f16_to_f32(five ? b5->dmin : b4->dmin);
      const uint8_t* scales = five ? b5->scales : b4->scales;
      const uint8_t* q = five ? b5->qs : b4->qs;
      for (int chunk = 0; chunk < 4; ++chunk, q += 32) {
        for (int nib = 0; nib < 2; ++nib) {
          int sub = 2 * chunk + nib;
          uint8_t sc, m;
          unpack_scale_min_k4(sub, scales, &sc, &m);
          float dl = d * sc, ml = dmin * m;
          for (int l = 0; l < 32; ++l) {
            int v = (q[l] >> (4 * nib)) & 0xF;
            if (five && ((b5->qh[l] >> sub) & 1)) v += 16;
            *y++ = dl * static_cast<float>(v) - ml;
          }
        }
      }
      return;
    }
    case Type::Q6_K: {
      auto* b = reinterpret_cast<const BlockQ6_K*>(in);
      float d = f16_to_f32(b->d);
      const uint8_t* ql = b->ql;
      const uint8_t* qh = b->qh;
      const int8_t* sc = b->scales;
      for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; ++l) {
          int is = l / 16;
          int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          y[l] = d * static_cast<float>(sc[is + 0] * q1);
          y[l + 32] = d * static_cast<float>(sc[is + 2] * q2);
          y[l + 64] = d * static_cast<float>(sc[is + 4] * q3);
          y[l + 96] = d * static_cast<float>(sc[is + 6] * q4);
        }
      }
      return;
    }
    case Type::Q8_K: {
      auto* b = reinterpret_cast<const BlockQ8_K*>(in);
      for (int i = 0; i < 256; ++i) y[i] = b->d * static_cast<float>(b->qs[i]);
      return;
    }
    case Type::IQ4_XS: {
      auto* b = reinterpret_cast<const BlockIQ4_XS*>(in);
      float d = f16_to_f32(b->d);
      for (int s = 0; s < 8; ++s, y += 32) {
        int ls = ((b->scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b->scales_h >> (2 * s)) & 3) << 4);
        float dl = d * static_cast<float>(ls - 32);
        const uint8_t* qs = b->qs + 16 * s;
        for (int j = 0; j < 16; ++j) {
          y[j] = dl * kIQ4NLValues[qs[j] & 0xF];
          y[j + 16] = dl * kIQ4NLValues[qs[j] >> 4];
        }
      }
      return;
    }
    default:
      fail("internal: {} is not a 256-element format", name(type));
  }
}

}  // namespace epq::quant
