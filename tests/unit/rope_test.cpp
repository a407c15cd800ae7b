// RopeTable (core/rope.h): every pair rotated by its position's angle, bit for bit the
// scalar formula x0' = x0 c - x1 s, x1' = x0 s + x1 c, in both layouts.
#include "core/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace epq {
namespace {

TEST(Rope, RotatesEveryPairAsTheScalarFormula) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0, 1);
  const int32_t positions[] = {0, 5, 1000};
  for (bool neox : {true, false}) {
    for (int n_dims : {20, 64, 128}) {  // 20: eight pairs at a time, then two
      RopeTable rope({.n_dims = n_dims, .neox = neox, .freq_base = 1e6f});
      rope.compute(positions, 3);
      const int half = n_dims / 2, second = neox ? half : 1, step = neox ? 1 : 2;
      for (int64_t t = 0; t < 3; ++t) {
        // Pair i of a unit vector (1, 0) comes out as (cos, sin) of its angle, exactly.
        std::vector<float> c(static_cast<size_t>(half)), s(c.size());
        for (int i = 0; i < half; ++i) {
          std::vector<float> unit(static_cast<size_t>(n_dims), 0.0f);
          unit[static_cast<size_t>(i * step)] = 1.0f;
          rope.apply(unit.data(), t);
          c[static_cast<size_t>(i)] = unit[static_cast<size_t>(i * step)];
          s[static_cast<size_t>(i)] = unit[static_cast<size_t>(i * step + second)];
          const double angle = positions[t] * std::pow(1e6, -2.0 * i / n_dims);
          ASSERT_NEAR(c[static_cast<size_t>(i)], std::cos(angle), 1e-3) << "pair " << i << ", position " << positions[t];
          ASSERT_NEAR(s[static_cast<size_t>(i)], std::sin(angle), 1e-3) << "pair " << i << ", position " << positions[t];
        }
        std::vector<float> head(static_cast<size_t>(n_dims));
        for (float& v : head) v = normal(rng);
        std::vector<float> rotated = head;
        rope.apply(rotated.data(), t);
        for (int i = 0; i < half; ++i) {
          const size_t a = static_cast<size_t>(i * step), b = a + static_cast<size_t>(second);
          const float ci = c[static_cast<size_t>(i)], si = s[static_cast<size_t>(i)];
          ASSERT_EQ(rotated[a], head[a] * ci - head[b] * si) << (neox ? "neox" : "norm") << ", n_dims " << n_dims << ", pair " << i;
          ASSERT_EQ(rotated[b], head[a] * si + head[b] * ci) << (neox ? "neox" : "norm") << ", n_dims " << n_dims << ", pair " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace epq
