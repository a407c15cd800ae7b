// Reference codecs: quantize -> dequantize error bounds for every type, and hand-built
// blocks whose decoded values are known exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/float_bits.h"
#include "quant/reference.h"
#include "quant/types.h"
#include "util/error.h"

namespace epq::quant {
namespace {

std::vector<float> decode(Type type, const void* block, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(type, block, y.data(), n);
  return y;
}

struct Bound {
  Type type;
  double max_relative_rmse;  // RMSE of the round trip / RMS of the input
};

class RoundTrip : public ::testing::TestWithParam<Bound> {};

TEST_P(RoundTrip, ErrorWithinBound) {
  const Bound b = GetParam();
  const int64_t n = 4096;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  // Exercise scale: a few outliers and an all-zero block.
  x[5] = 6.0f;
  x[700] = -5.5f;
  for (int i = 1024; i < 1280; ++i) x[static_cast<size_t>(i)] = 0.0f;

  std::vector<uint8_t> q(static_cast<size_t>(row_bytes(b.type, n)));
  quantize_row(b.type, x.data(), q.data(), n);
  std::vector<float> y = decode(b.type, q.data(), n);
  double err = 0, sig = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(y[static_cast<size_t>(i)])) << "element " << i;
    err += std::pow(double{x[static_cast<size_t>(i)]} - y[static_cast<size_t>(i)], 2);
    sig += std::pow(double{x[static_cast<size_t>(i)]}, 2);
  }
  for (int i = 1024; i < 1280; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], 0.0f) << name(b.type) << " zero block";
  EXPECT_LE(std::sqrt(err / sig), b.max_relative_rmse) << name(b.type);
  // Quantizing the decoded values again must be stable: codes are a fixed point.
  std::vector<uint8_t> q2(q.size());
  quantize_row(b.type, y.data(), q2.data(), n);
  std::vector<float> y2 = decode(b.type, q2.data(), n);
  double drift = 0;
  for (int64_t i = 0; i < n; ++i) drift += std::pow(double{y[static_cast<size_t>(i)]} - y2[static_cast<size_t>(i)], 2);
  EXPECT_LE(std::sqrt(drift / sig), b.max_relative_rmse) << name(b.type) << " re-quantization";
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, RoundTrip,
    // Bounds are ~1.25x the errors measured for this input, so a regression shows.
    ::testing::Values(Bound{Type::F32, 0.0}, Bound{Type::F16, 3e-4}, Bound{Type::BF16, 2.5e-3},
                      Bound{Type::Q8_0, 0.008}, Bound{Type::Q8_K, 0.01}, Bound{Type::Q6_K, 0.025},
                      Bound{Type::Q5_0, 0.056}, Bound{Type::Q5_1, 0.048}, Bound{Type::Q5_K, 0.05},
                      Bound{Type::Q4_0, 0.11}, Bound{Type::Q4_1, 0.1}, Bound{Type::Q4_K, 0.1},
                      Bound{Type::IQ4_NL, 0.1}, Bound{Type::IQ4_XS, 0.1}, Bound{Type::MXFP4, 0.14},
                      Bound{Type::Q3_K, 0.2}, Bound{Type::Q2_K, 0.41}),
    [](const auto& p) { return std::string(name(p.param.type)); });

// ---- Hand-built blocks: every field set by hand, every decoded value known. ----

const uint16_t kHalf = 0x3800;     // 0.5 in F16
const uint16_t kQuarter = 0x3400;  // 0.25
const uint16_t kOne = 0x3C00;      // 1.0
const uint16_t kTwo = 0x4000;      // 2.0

TEST(HandBuilt, FloatFormats) {
  float f[2] = {1.5f, -2.25f};
  EXPECT_EQ(decode(Type::F32, f, 2), (std::vector<float>{1.5f, -2.25f}));
  uint16_t h[2] = {0x3E00, 0xC080};  // 1.5, -2.25
  EXPECT_EQ(decode(Type::F16, h, 2), (std::vector<float>{1.5f, -2.25f}));
  uint16_t bf[2] = {0x3FC0, 0xC010};  // 1.5, -2.25
  EXPECT_EQ(decode(Type::BF16, bf, 2), (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3F80);  // ties round to even
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3F82);
}

TEST(HandBuilt, Q4_0) {
  BlockQ4_0 b{kHalf, {}};
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> y = decode(Type::Q4_0, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_EQ(y[j + 16], (7 - j) * 0.5f);
  }
}

TEST(HandBuilt, Q4_1) {
  BlockQ4_1 b{kHalf, kOne, {}};
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (3 << 4));
  std::vector<float> y = decode(Type::Q4_1, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f + 1.0f);
    EXPECT_EQ(y[j + 16], 2.5f);
  }
}

TEST(HandBuilt, Q5_0AndQ5_1) {
  // qh bit j is bit 4 of element j: set it for elements 0 and 31 only.
  BlockQ5_0 b{kOne, {0x01, 0x00, 0x00, 0x80}, {}};
  for (int j = 0; j < 16; ++j) b.qs[j] = 0xFF;  // low nibbles 15 everywhere
  std::vector<float> y = decode(Type::Q5_0, &b, 32);
  EXPECT_EQ(y[0], 31 - 16);
  EXPECT_EQ(y[1], 15 - 16);
  EXPECT_EQ(y[30], 15 - 16);
  EXPECT_EQ(y[31], 31 - 16);

  BlockQ5_1 c{kTwo, kHalf, {0x00, 0x00, 0x01, 0x00}, {}};  // bit 16: element 16
  c.qs[0] = 0x21;  // element 0: 1, element 16: 2 | 16
  std::vector<float> z = decode(Type::Q5_1, &c, 32);
  EXPECT_EQ(z[0], 2 * 1 + 0.5f);
  EXPECT_EQ(z[16], 2 * 18 + 0.5f);
  EXPECT_EQ(z[5], 0.5f);
}

TEST(HandBuilt, Q8_0) {
  BlockQ8_0 b{kQuarter, {}};
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128 < -127 ? -127 : j * 8 - 128);
  std::vector<float> y = decode(Type::Q8_0, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], b.qs[j] * 0.25f);
}

TEST(HandBuilt, IQ4_NL) {
  BlockIQ4_NL b{kOne, {}};
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> y = decode(Type::IQ4_NL, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], kIQ4NLValues[j]);
    EXPECT_EQ(y[j + 16], kIQ4NLValues[15 - j]);
  }
}

TEST(HandBuilt, MXFP4) {
  BlockMXFP4 b{128, {}};  // 2^(128-127) = 2, applied as half scale 1 to doubled codes
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> y = decode(Type::MXFP4, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], kMXFP4Values[j]);  // e.g. code 7 = 6.0 * 2 = 12
    EXPECT_EQ(y[j + 16], kMXFP4Values[15 - j]);
  }
  EXPECT_EQ(e8m0_to_f32_half(0), std::ldexp(1.0f, -128));
  EXPECT_EQ(e8m0_to_f32_half(1), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0_to_f32_half(127), 0.5f);
}

TEST(HandBuilt, Q2_K) {
  BlockQ2_K b{};
  b.d = kOne;
  b.dmin = kHalf;
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>((s % 4) | (2 << 4));  // scale s%4, min 2
  for (int i = 0; i < 64; ++i) b.qs[i] = 0b11100100;  // shifts 0,2,4,6 hold codes 0,1,2,3
  std::vector<float> y = decode(Type::Q2_K, &b, 256);
  for (int i = 0; i < 256; ++i) {
    int code = (i % 128) / 32;  // the shift group
    int sub = i / 16;
    EXPECT_EQ(y[i], static_cast<float>((sub % 4) * code) - 1.0f) << i;
  }
}

TEST(HandBuilt, Q3_K) {
  BlockQ3_K b{};
  b.d = kOne;
  // Scale of sub-block i = i - 32 + 32 = i (stored value i + 32).
  for (int i = 0; i < 16; ++i) {
    int v = i + 32;
    b.scales[i < 8 ? i : i - 8] |= static_cast<uint8_t>((v & 0xF) << (i < 8 ? 0 : 4));
    b.scales[8 + i % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (i / 4)));
  }
  for (int i = 0; i < 64; ++i) b.qs[i] = 0xFF;   // low bits 3 everywhere
  for (int i = 0; i < 32; ++i) b.hmask[i] = 0x0F;  // high bit set in the first half only
  std::vector<float> y = decode(Type::Q3_K, &b, 256);
  for (int i = 0; i < 256; ++i) {
    int code = i < 128 ? 3 : 3 - 4;
    EXPECT_EQ(y[i], static_cast<float>((i / 16) * code)) << i;
  }
}

TEST(HandBuilt, Q4_KAndQ5_K) {
  BlockQ4_K b{};
  b.d = kOne;
  b.dmin = kOne;
  int sc[8] = {1, 2, 3, 4, 33, 34, 35, 63}, mn[8] = {0, 1, 2, 3, 40, 41, 42, 62};
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
  }
  for (int i = 0; i < 128; ++i) b.qs[i] = 0x52;  // low nibble 2, high nibble 5
  std::vector<float> y = decode(Type::Q4_K, &b, 256);
  for (int i = 0; i < 256; ++i) {
    int sub = i / 32, code = sub % 2 == 0 ? 2 : 5;
    EXPECT_EQ(y[i], static_cast<float>(sc[sub] * code - mn[sub])) << i;
  }

  BlockQ5_K c{};
  c.d = b.d;
  c.dmin = b.dmin;
  std::memcpy(c.scales, b.scales, 12);
  std::memcpy(c.qs, b.qs, 128);
  for (int l = 0; l < 32; ++l) c.qh[l] = 0xAA;  // bit 4 set in odd sub-blocks
  std::vector<float> z = decode(Type::Q5_K, &c, 256);
  for (int i = 0; i < 256; ++i) {
    int sub = i / 32, code = sub % 2 == 0 ? 2 : 5 + 16;
    EXPECT_EQ(z[i], static_cast<float>(sc[sub] * code - mn[sub])) << i;
  }
}

TEST(HandBuilt, Q6_K) {
  BlockQ6_K b{};
  b.d = kHalf;
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s - 8);
  // Code of every element = 33 - 32 = 1: low nibble 1, high bits 2 (0b10) -> 1 | 32.
  for (int i = 0; i < 128; ++i) b.ql[i] = 0x11;
  for (int i = 0; i < 64; ++i) b.qh[i] = 0b10101010;
  std::vector<float> y = decode(Type::Q6_K, &b, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.5f * static_cast<float>(i / 16 - 8)) << i;
}

TEST(HandBuilt, Q8_K) {
  BlockQ8_K b{};
  b.d = 0.125f;
  for (int i = 0; i < 256; ++i) b.qs[i] = static_cast<int8_t>(i - 128 < -127 ? -127 : i - 128);
  std::vector<float> y = decode(Type::Q8_K, &b, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.125f * b.qs[i]);
}

TEST(HandBuilt, IQ4_XS) {
  BlockIQ4_XS b{};
  b.d = kOne;
  // Sub-block s gets ls = 32 + s (scale s): low nibble s, high bits 2 (32 = 0b10 << 4).
  for (int s = 0; s < 8; ++s) {
    b.scales_l[s / 2] |= static_cast<uint8_t>(s << (4 * (s % 2)));
    b.scales_h = static_cast<uint16_t>(b.scales_h | (2 << (2 * s)));
  }
  for (int i = 0; i < 128; ++i) b.qs[i] = 0xF0;  // element j: code 0 (-127), j+16: code 15 (113)
  std::vector<float> y = decode(Type::IQ4_XS, &b, 256);
  for (int i = 0; i < 256; ++i) {
    int s = i / 32;
    EXPECT_EQ(y[i], static_cast<float>(s * (i % 32 < 16 ? -127 : 113))) << i;
  }
}

TEST(Types, NamesAndSupport) {
  EXPECT_EQ(type_from_name("q4_k"), Type::Q4_K);
  EXPECT_EQ(type_from_name("IQ2_XXS"), Type::IQ2_XXS);
  EXPECT_FALSE(type_from_name("Q9_X"));
  EXPECT_FALSE(info(Type::IQ2_XXS).supported);
  EXPECT_TRUE(info(Type::MXFP4).supported);
  EXPECT_EQ(find_type(4), nullptr);  // removed Q4_2
  EXPECT_EQ(row_bytes(Type::Q4_K, 2048), 8 * 144);
  float x[256] = {};
  uint8_t out[256];
  EXPECT_THROW(quantize_row(Type::IQ2_XXS, x, out, 256), Error);
}

}  // namespace
}  // namespace epq::quant
