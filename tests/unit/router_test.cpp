// Expert selection (models/router.h) in each variant on small hand-checked cases.
#include "models/router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace epq::models {
namespace {

using Gating = RouterConfig::Gating;

TEST(Router, SoftmaxTopKRenormalised) {
  Router r({}, 4, 2);
  std::vector<float> logits = {0.0f, 2.0f, 1.0f, 2.0f};
  Route route;
  r.route(logits.data(), nullptr, route);
  // Experts 1 and 3 tie: the lower id comes first; equal weights after renormalising.
  EXPECT_EQ(route.experts, (std::vector<int>{1, 3}));
  EXPECT_FLOAT_EQ(route.weights[0], 0.5f);
  EXPECT_FLOAT_EQ(route.weights[1], 0.5f);
}

TEST(Router, SoftmaxWithoutRenormalisingKeepsProbabilities) {
  RouterConfig c;
  c.normalize = false;
  Router r(c, 3, 1);
  std::vector<float> logits = {0.0f, std::log(2.0f), std::log(5.0f)};
  Route route;
  r.route(logits.data(), nullptr, route);
  EXPECT_EQ(route.experts, (std::vector<int>{2}));
  EXPECT_NEAR(route.weights[0], 5.0 / 8.0, 1e-6);
}

TEST(Router, SigmoidSelectsByBiasedScoreButWeighsByProbability) {
  RouterConfig c;
  c.gating = Gating::kSigmoid;
  c.scale = 2.5f;
  Router r(c, 4, 2);
  std::vector<float> logits = {1.0f, 0.0f, -1.0f, 0.5f};
  const std::vector<float> bias = {0.0f, 0.0f, 3.0f, 0.0f};
  Route route;
  r.route(logits.data(), bias.data(), route);
  EXPECT_EQ(route.experts, (std::vector<int>{2, 0}));  // 2 wins only through its bias
  const double p2 = 1 / (1 + std::exp(1.0)), p0 = 1 / (1 + std::exp(-1.0));
  EXPECT_NEAR(route.weights[0], p2 / (p2 + p0) * 2.5, 1e-6);
  EXPECT_NEAR(route.weights[1], p0 / (p2 + p0) * 2.5, 1e-6);
}

TEST(Router, GroupLimitedTopKOnlyPicksFromTheBestGroups) {
  RouterConfig c;
  c.gating = Gating::kSigmoid;
  c.normalize = false;
  c.n_group = 3;
  c.n_group_used = 1;
  Router r(c, 6, 2);
  // Groups {0,1}, {2,3}, {4,5}. Expert 0 is the single best, but group 2's two best sum higher.
  std::vector<float> logits = {4.0f, -4.0f, 0.0f, 0.0f, 2.0f, 2.0f};
  Route route;
  r.route(logits.data(), nullptr, route);
  EXPECT_EQ(route.experts, (std::vector<int>{4, 5}));
  EXPECT_NEAR(route.weights[0], 1 / (1 + std::exp(-2.0)), 1e-6);
}

TEST(Router, RefusesGroupsThatDoNotDivideTheExperts) {
  RouterConfig c;
  c.n_group = 4;
  EXPECT_ANY_THROW(Router(c, 6, 2));
  c.n_group = 3;
  c.n_group_used = 1;
  EXPECT_ANY_THROW(Router(c, 6, 3));  // one group of 2 cannot supply 3 experts
}

}  // namespace
}  // namespace epq::models
