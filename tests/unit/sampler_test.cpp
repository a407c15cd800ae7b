// Sampling: greedy picks the argmax (lowest id on ties); top-k, top-p and min-p only ever
// return tokens they keep; the repetition penalty changes the greedy choice; the same seed
// gives the same draws. Token logprobs are the log softmax, the likeliest first.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/token_logprobs.h"

namespace epq::runtime {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, 3.0f, -1.0f, 0.0f};

TEST(Sampler, GreedyTakesTheArgmaxAndTheLowestIdOnTies) {
  SamplerOptions o;
  o.temperature = 0;
  Sampler s(o);
  EXPECT_EQ(s.sample(kLogits.data(), 6, {}), 1);
  EXPECT_EQ(argmax(kLogits.data(), 6), 1);
}

std::set<int32_t> draws(SamplerOptions o, int n = 400) {
  std::set<int32_t> seen;
  Sampler s(o);
  for (int i = 0; i < n; ++i) seen.insert(s.sample(kLogits.data(), 6, {}));
  return seen;
}

TEST(Sampler, FiltersKeepOnlyTheirTokens) {
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0, o.top_p = 1, o.min_p = 0;
  EXPECT_EQ(draws(o).size(), 6u);  // plain sampling reaches every token
  o.top_k = 2;
  EXPECT_EQ(draws(o), (std::set<int32_t>{1, 3}));
  o.top_k = 0, o.top_p = 0.5f;  // the two 3.0 logits hold ~58% of the mass
  EXPECT_EQ(draws(o), (std::set<int32_t>{1, 3}));
  o.top_p = 1, o.min_p = 0.5f;  // exp(2.5 - 3) = 0.61 >= 0.5; exp(1 - 3) = 0.14 < 0.5
  EXPECT_EQ(draws(o), (std::set<int32_t>{1, 2, 3}));
}

TEST(Sampler, RepetitionPenaltyDiscouragesRecentTokens) {
  SamplerOptions o;
  o.temperature = 0;
  o.repeat_penalty = 2.0f;
  Sampler s(o);
  const std::vector<int32_t> history = {1, 3};
  EXPECT_EQ(s.sample(kLogits.data(), 6, history), 2);  // 3.0 / 2 = 1.5 < 2.5
}

TEST(Sampler, SameSeedSameDraws) {
  SamplerOptions o;
  o.temperature = 1.5f;
  o.top_k = 0, o.top_p = 1, o.min_p = 0;
  o.seed = 99;
  std::vector<int32_t> a, b;
  Sampler s1(o), s2(o);
  for (int i = 0; i < 50; ++i) a.push_back(s1.sample(kLogits.data(), 6, {})), b.push_back(s2.sample(kLogits.data(), 6, {}));
  EXPECT_EQ(a, b);
  o.seed = 100;
  Sampler s3(o);
  std::vector<int32_t> c;
  for (int i = 0; i < 50; ++i) c.push_back(s3.sample(kLogits.data(), 6, {}));
  EXPECT_NE(a, c);
}

TEST(TokenLogprobs, AreTheLogSoftmaxWithTheLikeliestFirst) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  const TokenLogprob all = token_logprob(logits.data(), 5, 4, 5);
  double total = 0;
  for (const auto& [id, lp] : all.top) total += std::exp(double{lp});
  EXPECT_NEAR(total, 1.0, 1e-6);
  ASSERT_EQ(all.top.size(), 5u);
  // Ties go to the lower id: 1 before 3.
  EXPECT_EQ(all.top[0].first, 1);
  EXPECT_EQ(all.top[1].first, 3);
  EXPECT_EQ(all.top[2].first, 0);
  EXPECT_EQ(all.top[4].first, 2);
  const double log_sum = std::log(std::exp(-2.0) + 1 + std::exp(-5.0) + 1 + std::exp(-2.5));  // minus the max, 3
  EXPECT_FLOAT_EQ(all.logprob, static_cast<float>(0.5 - 3 - log_sum));
  EXPECT_EQ(all.id, 4);
  const TokenLogprob none = token_logprob(logits.data(), 5, 2, 0);
  EXPECT_TRUE(none.top.empty());
  EXPECT_FLOAT_EQ(none.logprob, all.top[4].second);
}

}  // namespace
}  // namespace epq::runtime
