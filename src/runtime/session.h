#pragma once
// One token sequence being evaluated: its KV cache (in a ForwardState), the tokens so
// far, and the logits of the last evaluation. Prompts are evaluated in batches of
// EngineOptions::n_batch tokens.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "models/model.h"
#include "runtime/engine.h"

namespace epq::runtime {

// What evaluation cost, summed over calls since the last reset_stats().
struct EvalStats {
  int64_t tokens = 0;
  double seconds = 0;
  double expert_wait_seconds = 0;
};

class Session {
 public:
  explicit Session(Engine& engine);

  // Evaluates tokens after the current ones. Returns the logits of the last token.
  const float* eval(std::span<const int32_t> tokens);
  // Evaluates tokens and stores the logits of every one of them in all_logits.
  void eval_all(std::span<const int32_t> tokens, std::vector<float>& all_logits);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t position() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t n_ctx() const { return state_->n_ctx(); }
  // Forgets tokens after position n (the KV cache is simply overwritten later).
  void truncate(int32_t n);
  const EvalStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  void run(std::span<const int32_t> tokens, bool all, float* out);

  Engine& engine_;
  std::unique_ptr<models::ForwardState> state_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
  EvalStats stats_;
};

}  // namespace epq::runtime
