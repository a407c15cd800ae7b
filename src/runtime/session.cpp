#include "runtime/session.h"

#include <algorithm>
#include <chrono>

#include "util/error.h"

namespace epq::runtime {

uint64_t Session::logits_bytes(int n_vocab, int batch_rows) {
  return Buffer::footprint(static_cast<size_t>(n_vocab) * sizeof(float)) +
         Buffer::footprint(static_cast<size_t>(batch_rows) * static_cast<size_t>(n_vocab) * sizeof(float));
}

uint64_t Session::snapshot_bytes(const models::ModelInfo& info) {
  return info.recurrent_bytes == 0 ? 0 : kSnapshots * Buffer::footprint(info.recurrent_bytes);
}

Session::Session(Engine& engine)
    : engine_(engine),
      state_(engine.new_state()),
      last_logits_(static_cast<size_t>(engine.info().n_vocab) * sizeof(float)),
      batch_logits_(engine.options().all_logits
                        ? static_cast<size_t>(engine.options().n_batch) * static_cast<size_t>(engine.info().n_vocab) * sizeof(float)
                        : 0) {
  if (engine.info().recurrent_bytes > 0) {
    snapshots_.resize(kSnapshots);
    for (Snapshot& snap : snapshots_) snap.state = Buffer(engine.info().recurrent_bytes);
  }
}

void Session::add_checkpoint(int32_t position) {
  if (!recurrent() || position <= this->position()) return;
  checkpoints_.insert(std::upper_bound(checkpoints_.begin(), checkpoints_.end(), position), position);
}

void Session::roll_back_to(int32_t n) {
  if (n >= position()) return;
  // Sliding-window caches have overwritten the windows of positions before `oldest`.
  const int32_t oldest = state_->oldest_rollback(position());
  if (!recurrent()) {
    tokens_.resize(static_cast<size_t>(n >= oldest ? n : 0));
    return;
  }
  Snapshot* best = nullptr;
  for (Snapshot& snap : snapshots_) {
    if (snap.position >= oldest && snap.position <= n && (!best || snap.position > best->position)) best = &snap;
  }
  if (best) {
    state_->load_recurrent(best->state.data());
  } else {
    state_->reset_recurrent();
  }
  const int32_t kept = best ? best->position : 0;
  tokens_.resize(static_cast<size_t>(kept));
  for (Snapshot& snap : snapshots_) {
    if (snap.position > kept) snap.position = -1;  // belonged to the forgotten continuation
  }
  checkpoints_.clear();
}

void Session::run(std::span<const int32_t> tokens, const std::function<void(size_t, const float*)>* on_logits) {
  if (tokens.empty()) return;
  if (position() + static_cast<int64_t>(tokens.size()) > n_ctx()) {
    fail("the context is full: {} tokens after {} would exceed --ctx {}", tokens.size(), position(), n_ctx());
  }
  const size_t batch = static_cast<size_t>(engine_.options().n_batch);
  const size_t n_vocab = static_cast<size_t>(engine_.info().n_vocab);
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0, n; i < tokens.size(); i += n) {
    // A batch ends at the next checkpoint, where the recurrent state is snapshotted.
    n = std::min(batch, tokens.size() - i);
    while (!checkpoints_.empty() && checkpoints_.front() <= position()) checkpoints_.erase(checkpoints_.begin());
    if (!checkpoints_.empty()) n = std::min(n, static_cast<size_t>(checkpoints_.front() - position()));
    const auto part = tokens.subspan(i, n);
    const bool all = on_logits != nullptr;
    float* dest = all ? batch_logits_.as<float>() : last_logits_.as<float>();
    models::ForwardTiming timing;
    try {
      engine_.forward(*state_, part, position(), all, dest, &timing);
    } catch (...) {
      start_over();  // a pass cut short (a failed read) leaves the recurrent state half updated
      throw;
    }
    stats_.expert_wait_seconds += timing.expert_wait_ms / 1000;
    tokens_.insert(tokens_.end(), part.begin(), part.end());
    if (!checkpoints_.empty() && checkpoints_.front() == position()) {
      Snapshot* slot = &snapshots_.front();  // a free one, else the one furthest back
      for (Snapshot& snap : snapshots_) {
        if (snap.position < slot->position) slot = &snap;
      }
      state_->save_recurrent(slot->state.data());
      slot->position = position();
      checkpoints_.erase(checkpoints_.begin());
    }
    if (all) {
      for (size_t t = 0; t < part.size(); ++t) (*on_logits)(i + t, dest + t * n_vocab);
      std::copy_n(dest + (part.size() - 1) * n_vocab, n_vocab, last_logits_.as<float>());
    }
  }
  stats_.tokens += static_cast<int64_t>(tokens.size());
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

const float* Session::eval(std::span<const int32_t> tokens) {
  run(tokens, nullptr);
  return last_logits_.as<float>();
}

void Session::eval_each(std::span<const int32_t> tokens, const std::function<void(size_t, const float*)>& on_logits) {
  if (batch_logits_.size() == 0) fail("internal: eval_each needs an engine made with all_logits");
  run(tokens, &on_logits);
}

std::span<const int32_t> Session::reuse_prefix(std::span<const int32_t> prompt) {
  size_t common = 0;
  while (common < tokens_.size() && common < prompt.size() && tokens_[common] == prompt[common]) ++common;
  if (common == prompt.size() && common > 0) --common;
  roll_back_to(static_cast<int32_t>(common));
  return prompt.subspan(tokens_.size());
}

void Session::start_over() {
  tokens_.clear();
  checkpoints_.clear();
  for (Snapshot& snap : snapshots_) snap.position = -1;
  state_->reset_recurrent();
}

void Session::truncate(int32_t n) {
  if (n < 0 || n > position()) fail("internal: cannot truncate to {} of {} tokens", n, position());
  const bool exact = n == 0 || n == position() ||
                     (n >= state_->oldest_rollback(position()) &&
                      (!recurrent() || std::any_of(snapshots_.begin(), snapshots_.end(), [&](const Snapshot& s) { return s.position == n; })));
  if (!exact) fail("internal: cannot roll the state back to position {} (no snapshot there, or out of the sliding window)", n);
  roll_back_to(n);
}

}  // namespace epq::runtime
