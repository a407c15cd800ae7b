// The forward pass's element-wise ops (core/ops.h) against plain scalar or double-precision math.
#include "core/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace epq {
namespace {

std::vector<float> normal_values(int64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(RmsNorm, MatchesDoubleMathForEveryLengthAndInPlace) {
  for (int64_t n : {1, 7, 8, 9, 128, 2051}) {
    const std::vector<float> x = normal_values(n, 3, 1), weight = normal_values(n, 1, 2);
    double sum = 0;
    for (float v : x) sum += double{v} * v;
    const double scale = 1 / std::sqrt(sum / static_cast<double>(n) + 1e-6);
    std::vector<float> out(x.size()), in_place = x;
    ops::rms_norm(x.data(), weight.data(), 1e-6f, n, out.data());
    ops::rms_norm(in_place.data(), weight.data(), 1e-6f, n, in_place.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const double expect = x[i] * scale * weight[i];
      ASSERT_NEAR(out[i], expect, 1e-6 * std::fabs(expect) + 1e-30) << "n = " << n << ", i = " << i;
      ASSERT_EQ(out[i], in_place[i]) << "n = " << n << ", i = " << i;
    }
  }
}

// The scaling step bit for bit: with x[0] = 1 the first output is the float scale itself,
// and every output must be (x * scale) * weight in float, as the scalar tail computes it.
TEST(RmsNorm, ScalesEveryElementAsTheScalarFormula) {
  for (int64_t n : {1, 7, 8, 9, 128, 2051}) {
    std::vector<float> x = normal_values(n, 3, 3);
    const std::vector<float> weight = normal_values(n, 1, 4);
    x[0] = 1.0f;
    std::vector<float> plain(x.size()), weighted(x.size());
    ops::rms_norm(x.data(), nullptr, 1e-6f, n, plain.data());
    ops::rms_norm(x.data(), weight.data(), 1e-6f, n, weighted.data());
    const float scale = plain[0];
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(plain[i], x[i] * scale) << "n = " << n << ", i = " << i;
      ASSERT_EQ(weighted[i], x[i] * scale * weight[i]) << "n = " << n << ", i = " << i;
    }
  }
}

TEST(Swiglu, MatchesDoubleMathForEveryLengthAndInPlace) {
  for (int64_t n : {1, 5, 8, 13, 768}) {
    std::vector<float> gate = normal_values(n, 4, 3);
    const std::vector<float> up = normal_values(n, 1, 4);
    gate[0] = -100;  // e^100 overflows: silu is -0
    if (n > 1) gate[1] = 100;  // e^-100 underflows: silu is the gate itself
    std::vector<float> out(gate.size()), in_place = gate;
    ops::swiglu(gate.data(), up.data(), n, out.data());
    ops::swiglu(in_place.data(), up.data(), n, in_place.data());
    for (size_t i = 0; i < gate.size(); ++i) {
      const double g = gate[i];
      const double expect = g / (1 + std::exp(-g)) * up[i];
      ASSERT_NEAR(out[i], expect, 4e-7 * std::fabs(expect) + 1e-30) << "n = " << n << ", gate = " << g;
      ASSERT_EQ(out[i], in_place[i]) << "n = " << n << ", i = " << i;
    }
  }
}

TEST(AddAndAddScaled, EqualTheScalarArithmeticForEveryLength) {
  for (int64_t n : {1, 7, 8, 9, 2051}) {
    const std::vector<float> x = normal_values(n, 2, 5), y = normal_values(n, 2, 6);
    std::vector<float> sum = x, scaled = x;
    ops::add(sum.data(), y.data(), n);
    ops::add_scaled(scaled.data(), y.data(), 0.37f, n);
    for (size_t i = 0; i < x.size(); ++i) {
      const float product = y[i] * 0.37f;
      ASSERT_EQ(sum[i], x[i] + y[i]) << "n = " << n << ", i = " << i;
      ASSERT_EQ(scaled[i], x[i] + product) << "n = " << n << ", i = " << i;
    }
  }
}

TEST(GateOps, SigmoidSoftplusL2NormAndOutputGateMatchDoubleMath) {
  for (float x : {-30.0f, -2.5f, 0.0f, 0.7f, 19.9f, 20.5f, 80.0f}) {
    EXPECT_NEAR(ops::sigmoid(x), 1 / (1 + std::exp(-double{x})), 1e-7);
    const double softplus = x > 20 ? x : std::log1p(std::exp(double{x}));  // ggml's cut at 20
    EXPECT_NEAR(ops::softplus(x), softplus, 2e-7 * (1 + std::fabs(softplus)));
  }
  std::vector<float> x = normal_values(37, 2, 5);
  const std::vector<float> gate = normal_values(37, 3, 6);
  std::vector<float> gated = x;
  ops::mul_sigmoid(gated.data(), gate.data(), 37);
  double norm = 0;
  for (float v : x) norm += double{v} * v;
  std::vector<float> unit = x;
  ops::l2_norm(unit.data(), 1e-6f, 37);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(gated[i], x[i] / (1 + std::exp(-double{gate[i]})), 1e-6 * (1 + std::fabs(x[i])));
    EXPECT_NEAR(unit[i], x[i] / std::sqrt(norm), 1e-6);
  }
  std::vector<float> zero(8, 0.0f);
  ops::l2_norm(zero.data(), 1e-6f, 8);  // a zero vector stays zero: divided by eps, not by 0
  EXPECT_EQ(zero, std::vector<float>(8, 0.0f));
}

}  // namespace
}  // namespace epq
