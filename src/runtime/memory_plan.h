#pragma once
// The memory ledger: one decision, before the first token, of where every byte of a
// RAM budget goes. The process's measured footprint so far, the resident weights, the KV
// cache and scratch, logits, thread stacks, I/O and heap headroom are computed; the
// expert arena gets what is left, divided among slot size classes in proportion to their
// share of the expert bytes. Below the minimum (top-k slots per class) the plan refuses.
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "models/model.h"
#include "pager/io_engine.h"
#include "pager/size_classes.h"

namespace epq::runtime {

struct PlanInput {
  uint64_t budget = 0;
  int n_ctx = 0, n_batch = 0, n_threads = 0;
  pager::IoOptions io;
  uint64_t process_bytes = 0;  // the process's measured RSS, the model's mapping dropped
  uint64_t reserved_bytes = 0;  // kept for the caller (an HTTP server's threads and buffers)
  bool all_logits = false;  // a batch of logits rows is kept (EngineOptions::all_logits)
  bool prefetch_history = false;  // the pager keeps the history predictor's tables (--prefetch history)
  int n_sequences = 1;  // sequences kept at once (serve --parallel): each has its own KV cache, scratch, logits, snapshots
};

struct LedgerLine {
  std::string name;
  uint64_t bytes;
};

struct MemoryPlan {
  std::vector<LedgerLine> lines;  // everything except the arena
  uint64_t fixed_bytes = 0;       // sum of lines
  uint64_t budget = 0;
  pager::SizeClasses classes;
  std::vector<int64_t> slots;     // per class
  uint64_t arena_bytes = 0;       // slots actually allocated
  uint64_t expert_bytes_total = 0;  // all experts, as slot bytes
  uint64_t minimum_budget = 0;    // smallest budget that runs
  uint64_t all_fit_budget = 0;    // smallest budget that holds every expert
  int n_expert_used = 0;
  bool feasible = false;
  double coverage() const;  // share of the experts the arena holds
  // The refusal line for an infeasible plan.
  std::string refusal() const;
};

// Heap headroom for small, short-lived allocations (routing tables, I/O queues, stats).
inline constexpr uint64_t kHeapHeadroom = 16ull << 20;
// The process line is the measured peak rounded up to whole MiB plus this margin for
// code and data first touched after the measurement (sampling, output, error paths).
inline constexpr uint64_t kProcessMargin = 2ull << 20;

// Slots per size class for an arena of `arena` bytes: top-k per class first (at most
// the class's experts), the rest in proportion to each class's share of the expert bytes.
std::vector<int64_t> divide_arena(const pager::SizeClasses& classes, int n_expert_used, uint64_t arena);

// Opens nothing: measures this process now and plans. Call it after the model's header
// and tokenizer are loaded and the mapping is dropped, as the engine does.
MemoryPlan plan_memory_now(const gguf::File& file, const models::ModelInfo& info, const models::ModelOptions& model_options,
                           PlanInput input);

MemoryPlan plan_memory(const gguf::File& file, const models::ModelInfo& info, const models::ModelOptions& model_options,
                       const PlanInput& input);

}  // namespace epq::runtime
