#pragma once
// One token sequence being evaluated: its KV cache (in a ForwardState), the tokens so
// far, and the logits of the last evaluation. Prompts are evaluated in batches of
// EngineOptions::n_batch tokens; every forward pass is reported to the engine's pass log.
//
// A KV cache rolls back by forgetting positions; the state of recurrent layers (Gated
// DeltaNet) cannot. For models that have it, the session keeps up to kSnapshots copies of
// that state taken at checkpoint positions (where a reusable prefix ends: the end of a
// prompt, the end of a conversation before the generation prompt), and rolls back only
// to a checkpoint, or to the start. A sliding-window cache rolls back only as far as its
// ring still holds the window (ForwardState::oldest_rollback); further means the start.
// An evaluation that fails (an exception from the forward pass, such as an I/O error)
// leaves the session empty, as new: a half-run pass would otherwise leave its recurrent
// state in the next evaluation.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "models/model.h"
#include "runtime/engine.h"
#include "util/buffer.h"

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
  // Evaluates tokens and hands the logits of each one, in order, to on_logits(i, logits).
  // Needs an engine made with EngineOptions::all_logits.
  void eval_each(std::span<const int32_t> tokens, const std::function<void(size_t, const float*)>& on_logits);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t position() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t n_ctx() const { return state_->n_ctx(); }
  // Forgets tokens after position n (their KV entries are overwritten later). With
  // recurrent state, n must be 0, the current position, or a checkpoint; with sliding
  // windows, 0 or not before ForwardState::oldest_rollback.
  void truncate(int32_t n);
  // Snapshot the recurrent state when evaluation reaches `position` (a no-op for models
  // without recurrent layers, or for a position already passed).
  void add_checkpoint(int32_t position);
  // Keeps the longest prefix of the held tokens that prompt starts with (the KV cache of
  // an earlier turn or request), but never all of prompt, and returns the rest of prompt:
  // the tokens still to evaluate, at least one when prompt is not empty.
  std::span<const int32_t> reuse_prefix(std::span<const int32_t> prompt);
  const EvalStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  // Bytes of the logits buffers a session allocates (for the memory plan): the last
  // token's, and batch_rows more rows (n_batch with all_logits, else 0).
  static uint64_t logits_bytes(int n_vocab, int batch_rows);
  // Recurrent-state snapshots a session keeps, and their bytes (for the memory plan).
  static constexpr int kSnapshots = 2;
  static uint64_t snapshot_bytes(const models::ModelInfo& info);

 private:
  void run(std::span<const int32_t> tokens, const std::function<void(size_t, const float*)>* on_logits);
  // Rolls back to the latest snapshot at or before position n (or to the start).
  void roll_back_to(int32_t n);
  // Forgets every token, snapshot and checkpoint and resets the recurrent state.
  void start_over();
  bool recurrent() const { return !snapshots_.empty(); }

  struct Snapshot {
    int32_t position = -1;  // -1: free
    Buffer state;
  };

  Engine& engine_;
  std::unique_ptr<models::ForwardState> state_;
  std::vector<int32_t> tokens_;
  Buffer last_logits_;   // n_vocab floats
  Buffer batch_logits_;  // n_batch * n_vocab floats, only with EngineOptions::all_logits
  EvalStats stats_;
  std::vector<Snapshot> snapshots_;  // kSnapshots for models with recurrent state, else none
  std::vector<int32_t> checkpoints_;  // positions still to snapshot, ascending
};

}  // namespace epq::runtime
