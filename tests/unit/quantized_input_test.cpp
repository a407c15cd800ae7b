// QuantizedInput (core/quantized_input.h): a batch's rows, quantized on a pool, are the
// bytes quantize_activation gives each row alone, in every activation format.
#include "core/quantized_input.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"

namespace epq {
namespace {

TEST(QuantizedInput, RowsQuantizedOnThePoolAreEachRowsOwnBytes) {
  constexpr int64_t kTokens = 37, kCols = 512, kStride = kCols + 8;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 2);
  std::vector<float> x(static_cast<size_t>(kTokens * kStride));
  for (float& v : x) v = normal(rng);
  ThreadPool pool(2);
  QuantizedInput input(kTokens, kCols);
  for (int pass = 0; pass < 2; ++pass) {
    // The second pass changes the floats: set() must forget the first pass's rows.
    if (pass == 1) {
      for (float& v : x) v = -0.5f * v;
    }
    input.set(pool, x.data(), kTokens, kCols, kStride);
    for (int f = 0; f < quant::kActFormatCount; ++f) {
      const auto format = static_cast<quant::ActFormat>(f);
      const size_t row = input.stride(format);
      const uint8_t* rows = input.data(format);
      std::vector<uint8_t> expected(row);
      for (int64_t t = 0; t < kTokens; ++t) {
        quant::quantize_activation(format, x.data() + t * kStride, expected.data(), kCols);
        ASSERT_EQ(std::memcmp(rows + static_cast<size_t>(t) * row, expected.data(), row), 0) << "format " << f << ", row " << t << ", pass " << pass;
      }
    }
  }
}

}  // namespace
}  // namespace epq
