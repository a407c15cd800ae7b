#pragma once
// Which experts the next routed layer of a forward pass will ask for, learned from the
// requests themselves (no weights, so it works the same on traced and replayed routing).
// For each pair of consecutive routed layers (a, b) of a pass it counts how often expert
// i of a and expert j of b were requested in the same pass: C[a][i][j]. Given the
// experts S that layer a asks for now, it names the n experts j of b with the largest
// sum over i in S of P(j | i) = C[a][i][j] / sum_j' C[a][i][j'] (in 32-bit fixed point;
// ties: the lower id), leaving out those never seen together with S. The normalisation
// keeps an often-requested i from outvoting the rest (on the demo model's traces it names
// 59-64% of the next layer's experts, against 56-61% for raw counts). Prefetch reads what
// it names (pager.h); `epq replay` measures it.
#include <cstdint>
#include <span>
#include <vector>

#include "pager/size_classes.h"

namespace epq::pager {

class NextLayerPredictor {
 public:
  explicit NextLayerPredictor(const SizeClasses& classes);

  // Layer `layer` asks for `experts` (distinct); a layer at or before the previous one
  // starts a new pass.
  void observe(int layer, std::span<const int> experts);
  // The routed layer after `layer` within a pass, or -1 for the last one.
  int next_layer(int layer) const { return next_[static_cast<size_t>(layer)]; }
  // Up to n experts of next_layer(layer), most likely first, given that `layer` asks for
  // `experts`. Empty for the last routed layer.
  void predict(int layer, std::span<const int> experts, size_t n, std::vector<int>& out) const;

  // Bytes of the count tables for a model with these size classes.
  static uint64_t memory_bytes(const SizeClasses& classes);

 private:
  std::vector<int> next_;             // per layer: the next routed layer, -1 at the end
  std::vector<int> n_expert_;         // per layer
  std::vector<std::vector<uint32_t>> counts_;  // per layer a: n_expert(a) x n_expert(next(a))
  int previous_layer_ = -1;
  std::vector<int> previous_experts_;
  mutable std::vector<uint64_t> scores_;
};

}  // namespace epq::pager
