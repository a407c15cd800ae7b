#pragma once
// Picks the next token from logits. Temperature <= 0 is greedy (lowest id on ties).
// Otherwise, in order: repetition penalty, top-k, top-p, min-p (on the softmax of the
// penalized logits), then temperature and a draw from a generator seeded by `seed`, so
// the same seed and inputs give the same tokens.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace epq::runtime {

// The accepted ranges, one table for the command line and the server.
inline constexpr double kMaxTemperature = 2;
inline constexpr double kMaxRepeatPenalty = 10;
inline constexpr int kMaxTopK = 1 << 20;
inline constexpr int kMaxRepeatLastN = 1 << 20;  // -1: the whole history
inline constexpr int kMaxGeneratedTokens = 1 << 20;

struct SamplerOptions {
  float temperature = 0.8f;
  int top_k = 40;              // 0: off
  float top_p = 0.95f;         // 1: off
  float min_p = 0.05f;         // 0: off
  float repeat_penalty = 1.0f; // 1: off
  int repeat_last_n = 64;
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);
  int32_t sample(const float* logits, int32_t n_vocab, std::span<const int32_t> history);

 private:
  SamplerOptions o_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

int32_t argmax(const float* logits, int32_t n);

}  // namespace epq::runtime
