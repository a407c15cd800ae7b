#include "runtime/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace epq::runtime {

TokenLogprob token_logprob(const float* logits, int32_t n_vocab, int32_t id, int top) {
  const float max = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double log_sum = std::log(sum);
  auto logprob = [&](int32_t i) { return static_cast<float>(static_cast<double>(logits[i]) - max - log_sum); };
  TokenLogprob t{id, logprob(id), {}};
  const int n = std::clamp(top, 0, n_vocab);
  if (n == 0) return t;
  std::vector<int32_t> order(static_cast<size_t>(n_vocab));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (int i = 0; i < n; ++i) t.top.emplace_back(order[static_cast<size_t>(i)], logprob(order[static_cast<size_t>(i)]));
  return t;
}

}  // namespace epq::runtime
