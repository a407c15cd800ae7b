#include "runtime/session.h"

#include <algorithm>
#include <chrono>

#include "util/error.h"

namespace epq::runtime {

Session::Session(Engine& engine) : engine_(engine), state_(engine.new_state()) {
  logits_.resize(static_cast<size_t>(engine.info().n_vocab));
}

void Session::run(std::span<const int32_t> tokens, bool all, float* out) {
  if (tokens.empty()) return;
  if (position() + static_cast<int64_t>(tokens.size()) > n_ctx()) {
    fail("the context is full: {} tokens after {} would exceed --ctx {}", tokens.size(), position(), n_ctx());
  }
  const size_t batch = static_cast<size_t>(engine_.options().n_batch);
  const size_t n_vocab = static_cast<size_t>(engine_.info().n_vocab);
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < tokens.size(); i += batch) {
    const auto part = tokens.subspan(i, std::min(batch, tokens.size() - i));
    const bool last_part = i + part.size() == tokens.size();
    float* dest = all ? out + i * n_vocab : logits_.data();
    models::ForwardTiming timing;
    engine_.model().forward(*state_, engine_.experts(), engine_.pool(), part, position(), all, dest, &timing);
    stats_.expert_wait_seconds += timing.expert_wait_ms / 1000;
    tokens_.insert(tokens_.end(), part.begin(), part.end());
    if (all && last_part) std::copy_n(dest + (part.size() - 1) * n_vocab, n_vocab, logits_.data());
  }
  stats_.tokens += static_cast<int64_t>(tokens.size());
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

const float* Session::eval(std::span<const int32_t> tokens) {
  run(tokens, false, nullptr);
  return logits_.data();
}

void Session::eval_all(std::span<const int32_t> tokens, std::vector<float>& all_logits) {
  all_logits.resize(tokens.size() * static_cast<size_t>(engine_.info().n_vocab));
  run(tokens, true, all_logits.data());
}

void Session::truncate(int32_t n) {
  if (n < 0 || n > position()) fail("internal: cannot truncate to {} of {} tokens", n, position());
  tokens_.resize(static_cast<size_t>(n));
}

}  // namespace epq::runtime
