#include "models/router.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/ops.h"
#include "util/error.h"

namespace epq::models {

Router::Router(const RouterConfig& config, int n_expert, int k)
    : c_(config), n_expert_(n_expert), k_(k), score_(static_cast<size_t>(n_expert)), group_score_(static_cast<size_t>(config.n_group)),
      order_(static_cast<size_t>(n_expert)), groups_(static_cast<size_t>(config.n_group)), keep_(static_cast<size_t>(config.n_group)) {
  if (c_.n_group < 1 || n_expert % c_.n_group != 0 || c_.n_group_used < 1 || c_.n_group_used > c_.n_group) {
    fail("router: {} experts cannot form {} groups with {} used", n_expert, c_.n_group, c_.n_group_used);
  }
  if (k > n_expert / c_.n_group * c_.n_group_used) fail("router: top-{} exceeds the experts of {} groups", k, c_.n_group_used);
}

void Router::route(float* p, const float* bias, Route& out) {
  const size_t n = static_cast<size_t>(n_expert_);
  if (c_.gating == RouterConfig::Gating::kSoftmax) {
    ops::softmax(p, n_expert_);
  } else {
    for (size_t e = 0; e < n; ++e) p[e] = ops::sigmoid(p[e]);
  }
  for (size_t e = 0; e < n; ++e) score_[e] = bias ? p[e] + bias[e] : p[e];
  auto better = [&](int a, int b) { return score_[static_cast<size_t>(a)] > score_[static_cast<size_t>(b)] || (score_[static_cast<size_t>(a)] == score_[static_cast<size_t>(b)] && a < b); };

  if (c_.n_group > 1) {
    // Rank groups by the sum of their two best scores; mask out all but the best n_group_used.
    const int per_group = n_expert_ / c_.n_group;
    for (int g = 0; g < c_.n_group; ++g) {
      const float* s = score_.data() + g * per_group;
      float best = -std::numeric_limits<float>::infinity(), second = best;
      for (int i = 0; i < per_group; ++i) {
        if (s[i] > best) second = best, best = s[i];
        else if (s[i] > second) second = s[i];
      }
      group_score_[static_cast<size_t>(g)] = per_group > 1 ? best + second : best;
    }
    std::iota(groups_.begin(), groups_.end(), 0);
    std::partial_sort(groups_.begin(), groups_.begin() + c_.n_group_used, groups_.end(), [&](int a, int b) {
      return group_score_[static_cast<size_t>(a)] > group_score_[static_cast<size_t>(b)] ||
             (group_score_[static_cast<size_t>(a)] == group_score_[static_cast<size_t>(b)] && a < b);
    });
    std::fill(keep_.begin(), keep_.end(), false);
    for (int i = 0; i < c_.n_group_used; ++i) keep_[static_cast<size_t>(groups_[static_cast<size_t>(i)])] = true;
    for (size_t e = 0; e < n; ++e) {
      if (!keep_[e / static_cast<size_t>(per_group)]) score_[e] = -std::numeric_limits<float>::infinity();
    }
  }

  std::iota(order_.begin(), order_.end(), 0);
  std::partial_sort(order_.begin(), order_.begin() + k_, order_.end(), better);
  out.experts.assign(order_.begin(), order_.begin() + k_);
  out.weights.resize(static_cast<size_t>(k_));
  float sum = 0;
  for (int j = 0; j < k_; ++j) sum += p[out.experts[static_cast<size_t>(j)]];
  sum = std::max(sum, 6.103515625e-5f);
  for (int j = 0; j < k_; ++j) {
    const float w = p[out.experts[static_cast<size_t>(j)]];
    out.weights[static_cast<size_t>(j)] = (c_.normalize ? w / sum : w) * c_.scale;
  }
}

}  // namespace epq::models
