#pragma once
// Log-probabilities of a generated token and of the likeliest alternatives, as the
// OpenAI API's `logprobs` reports them: from the model's own distribution,
// log softmax(logits), before temperature, penalties or truncation change it.
#include <cstdint>
#include <utility>
#include <vector>

namespace epq::runtime {

inline constexpr int kMaxTopLogprobs = 20;

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // the `top` likeliest tokens, likeliest first (ties: lower id first)
};

// logprob(i) = logits[i] - max - log(sum_j exp(logits[j] - max)), the sum in double.
TokenLogprob token_logprob(const float* logits, int32_t n_vocab, int32_t id, int top);

}  // namespace epq::runtime
