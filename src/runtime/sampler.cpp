#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace epq::runtime {

int32_t argmax(const float* logits, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

Sampler::Sampler(const SamplerOptions& options) : o_(options), rng_(options.seed) {}

int32_t Sampler::sample(const float* logits, int32_t n_vocab, std::span<const int32_t> history) {
  candidates_.resize(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) candidates_[static_cast<size_t>(i)] = {logits[i], i};
  if (o_.repeat_penalty != 1.0f && o_.repeat_last_n != 0) {
    const size_t n = o_.repeat_last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(o_.repeat_last_n));
    std::unordered_set<int32_t> seen(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
    for (int32_t id : seen) {
      if (id < 0 || id >= n_vocab) continue;
      float& l = candidates_[static_cast<size_t>(id)].first;
      l = l > 0 ? l / o_.repeat_penalty : l * o_.repeat_penalty;
    }
  }
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  if (o_.temperature <= 0) return std::min_element(candidates_.begin(), candidates_.end(), by_logit)->second;

  size_t keep = candidates_.size();
  if (o_.top_k > 0 && static_cast<size_t>(o_.top_k) < keep) keep = static_cast<size_t>(o_.top_k);
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep), candidates_.end(), by_logit);
  candidates_.resize(keep);

  // Probabilities at temperature 1 decide top-p and min-p.
  std::vector<double> p(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp(double{candidates_[i].first} - candidates_[0].first);
  double cumulative = 0;
  size_t cut = keep;
  for (size_t i = 0; i < keep; ++i) {
    if (o_.min_p > 0 && p[i] / p[0] < o_.min_p) {
      cut = std::min(cut, std::max<size_t>(1, i));
      break;
    }
    cumulative += p[i] / sum;
    if (o_.top_p < 1 && cumulative >= o_.top_p) {
      cut = std::min(cut, i + 1);
      break;
    }
  }
  candidates_.resize(cut);

  std::vector<double> weights(cut);
  for (size_t i = 0; i < cut; ++i) weights[i] = std::exp((double{candidates_[i].first} - candidates_[0].first) / o_.temperature);
  std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
  return candidates_[pick(rng_)].second;
}

}  // namespace epq::runtime
