#pragma once
// Expert selection from one token's router logits, in the variants llama.cpp's MoE FFN
// builds (build_moe_ffn):
//   probabilities p = softmax(logits) over all experts, or sigmoid(logits) element-wise
//   selection score = p + bias (the selection bias of DeepSeek-V3-style routers, if any)
//   group-limited: experts form n_group equal groups; a group scores the sum of its two
//     best selection scores; only the n_group_used best groups' experts compete
//   chosen = the k best selection scores (ties: the lower expert id), in that order
//   weight_j = p[chosen_j]  (not the biased score), then optionally divided by
//     max(sum_j weight_j, 6.1e-5), then multiplied by scale
#include <cstdint>
#include <vector>

namespace epq::models {

struct RouterConfig {
  enum class Gating { kSoftmax, kSigmoid };
  Gating gating = Gating::kSoftmax;
  bool normalize = true;  // divide the chosen weights by their sum
  float scale = 1.0f;
  int n_group = 1, n_group_used = 1;  // group-limited top-k when n_group > 1
};

// A token's chosen experts, in top-k order, and their weights.
struct Route {
  std::vector<int> experts;
  std::vector<float> weights;
};

class Router {
 public:
  Router(const RouterConfig& config, int n_expert, int k);
  // logits: n_expert values, overwritten with the probabilities. bias: n_expert or null.
  void route(float* logits, const float* bias, Route& out);
  int k() const { return k_; }

 private:
  RouterConfig c_;
  int n_expert_, k_;
  std::vector<float> score_, group_score_;
  std::vector<int> order_, groups_;
  std::vector<bool> keep_;  // per group: among the n_group_used best
};

}  // namespace epq::models
