#include "pager/next_layer_predictor.h"

#include <algorithm>

namespace epq::pager {
namespace {

std::vector<int> experts_per_layer(const SizeClasses& classes) {
  std::vector<int> n(classes.class_of_layer.size(), 0);
  for (size_t l = 0; l < n.size(); ++l) {
    if (classes.class_of_layer[l] >= 0) n[l] = classes.classes[static_cast<size_t>(classes.class_of_layer[l])].n_expert;
  }
  return n;
}

std::vector<int> next_routed_layers(const std::vector<int>& n_expert) {
  std::vector<int> next(n_expert.size(), -1);
  for (int l = static_cast<int>(n_expert.size()) - 2, following = -1; l >= 0; --l) {
    if (n_expert[static_cast<size_t>(l) + 1] > 0) following = l + 1;
    next[static_cast<size_t>(l)] = following;
  }
  return next;
}

}  // namespace

NextLayerPredictor::NextLayerPredictor(const SizeClasses& classes)
    : next_(next_routed_layers(experts_per_layer(classes))), n_expert_(experts_per_layer(classes)), counts_(n_expert_.size()) {
  for (size_t l = 0; l < n_expert_.size(); ++l) {
    if (n_expert_[l] > 0 && next_[l] >= 0) counts_[l].assign(static_cast<size_t>(n_expert_[l]) * static_cast<size_t>(n_expert_[static_cast<size_t>(next_[l])]), 0);
  }
}

uint64_t NextLayerPredictor::memory_bytes(const SizeClasses& classes) {
  const std::vector<int> n = experts_per_layer(classes), next = next_routed_layers(n);
  uint64_t cells = 0;
  for (size_t l = 0; l < n.size(); ++l) {
    if (n[l] > 0 && next[l] >= 0) cells += static_cast<uint64_t>(n[l]) * static_cast<uint64_t>(n[static_cast<size_t>(next[l])]);
  }
  return cells * sizeof(uint32_t) + n.size() * 64;
}

void NextLayerPredictor::observe(int layer, std::span<const int> experts) {
  if (previous_layer_ >= 0 && layer > previous_layer_ && next_[static_cast<size_t>(previous_layer_)] == layer) {
    std::vector<uint32_t>& c = counts_[static_cast<size_t>(previous_layer_)];
    const size_t width = static_cast<size_t>(n_expert_[static_cast<size_t>(layer)]);
    for (int i : previous_experts_) {
      uint32_t* row = c.data() + static_cast<size_t>(i) * width;
      for (int j : experts) row[j] += row[j] < UINT32_MAX;
    }
  }
  previous_layer_ = layer;
  previous_experts_.assign(experts.begin(), experts.end());
}

void NextLayerPredictor::predict(int layer, std::span<const int> experts, size_t n, std::vector<int>& out) const {
  out.clear();
  const int b = next_[static_cast<size_t>(layer)];
  if (b < 0 || n == 0) return;
  const size_t width = static_cast<size_t>(n_expert_[static_cast<size_t>(b)]);
  const std::vector<uint32_t>& c = counts_[static_cast<size_t>(layer)];
  scores_.assign(width, 0);
  for (int i : experts) {
    const uint32_t* row = c.data() + static_cast<size_t>(i) * width;
    uint64_t total = 0;
    for (size_t j = 0; j < width; ++j) total += row[j];
    if (total == 0) continue;
    for (size_t j = 0; j < width; ++j) scores_[j] += (uint64_t{row[j]} << 32) / total;
  }
  for (size_t j = 0; j < width; ++j) {
    if (scores_[j] > 0) out.push_back(static_cast<int>(j));
  }
  const size_t keep = std::min(n, out.size());
  std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(keep), out.end(), [&](int x, int y) {
    return scores_[static_cast<size_t>(x)] != scores_[static_cast<size_t>(y)] ? scores_[static_cast<size_t>(x)] > scores_[static_cast<size_t>(y)] : x < y;
  });
  out.resize(keep);
}

}  // namespace epq::pager
