// The vector helpers in util/avx2.h against scalar math.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <vector>

#include "util/avx2.h"

namespace epq {
namespace {

float exp_lane(float x) {
  alignas(32) float out[8];
  _mm256_store_ps(out, exp8(_mm256_set1_ps(x)));
  return out[0];
}

TEST(Exp8, WithinTwoUlpOfTheExactValue) {
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.34657359f, 0.34657359f, -87.0f, 88.0f, 88.72f, -87.33f};
  for (float x = -87.3f; x < 88.7f; x += 0.00137f) xs.push_back(x);
  for (float x : xs) {
    const double exact = std::exp(static_cast<double>(x));
    const float got = exp_lane(x);
    const double ulp = std::nextafter(static_cast<float>(exact), INFINITY) - static_cast<float>(exact);
    ASSERT_LE(std::fabs(got - exact), 2 * ulp) << "x = " << x;
  }
}

TEST(Exp8, UnderflowsToZeroAndOverflowsToInfinity) {
  EXPECT_EQ(exp_lane(-87.5f), 0.0f);
  EXPECT_EQ(exp_lane(-1000.0f), 0.0f);
  EXPECT_EQ(exp_lane(-INFINITY), 0.0f);
  EXPECT_EQ(exp_lane(89.0f), INFINITY);
  EXPECT_EQ(exp_lane(INFINITY), INFINITY);
}

TEST(Exp8, EachLaneOnItsOwn) {
  alignas(32) const float x[8] = {-3.0f, -2.0f, -1.0f, 0.0f, 1.0f, 2.0f, -100.0f, 3.0f};
  alignas(32) float out[8];
  _mm256_store_ps(out, exp8(_mm256_load_ps(x)));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], exp_lane(x[i])) << i;
}

}  // namespace
}  // namespace epq
