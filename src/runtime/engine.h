#pragma once
// A loaded model ready to run: the GGUF file, the tokenizer, the architecture with its
// resident weights, the source of routed experts, and the thread pool.
//
// Without a RAM budget the file is mapped and every weight is used in place (the
// all-in-RAM path). With one, the memory plan decides everything up front: resident
// weights are read into the process with direct I/O, and routed experts are paged into
// the arena the plan leaves.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/thread_pool.h"
#include "gguf/file.h"
#include "models/model.h"
#include "pager/io_engine.h"
#include "pager/pager.h"
#include "runtime/batched_passes.h"
#include "runtime/memory_plan.h"
#include "runtime/pass_log.h"
#include "text/tokenizer.h"

namespace epq::runtime {

class ResidentLoader;
class RoutingRecorder;
class RouteReplayer;

struct EngineOptions {
  std::string model_path;
  int n_ctx = 4096;
  int n_threads = 0;  // 0: physical cores
  int n_batch = 256;  // tokens per forward pass when processing a prompt, and the prompt tokens of a batched step
  std::optional<int> expert_used;
  bool chunked_delta_rule = false;  // see models::ModelOptions
  std::optional<uint64_t> ram_budget;  // set: page the experts within this budget
  std::string evict = "lrfu";
  pager::IoOptions io;
  std::string stats_file;
  std::string trace_routing;  // set: record every pass's routing to this file (routing_trace.h)
  std::string route_trace;    // set: replace the routers' choices by this trace's (route_replay.h)
  // Read predicted experts ahead (pager.h). Unset: the stale gate, or off with a route
  // trace, which replaces the routers the gate predicts from (resolve fills it in).
  std::optional<pager::Prefetch> prefetch;
  bool quiet = false;  // no notes on stderr
  // All in RAM: the weights are read from the file's mapping, in the page cache, as they
  // are; by default they are read into the process's memory (runtime/resident_loader.h).
  bool mmap = false;
  uint64_t reserved_bytes = 0;  // budget kept for the caller (e.g. the HTTP server's threads)
  bool all_logits = false;  // the logits of every prompt position are wanted (perplexity)
  int n_sequences = 1;  // sequences the caller keeps at once, each with its own state (the memory plan counts them)
};

class Engine {
 public:
  explicit Engine(const EngineOptions& options);
  ~Engine();

  const EngineOptions& options() const { return options_; }
  const gguf::File& file() const { return file_; }
  const models::ModelInfo& info() const { return model_->info(); }
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  ThreadPool& pool() { return *pool_; }
  std::unique_ptr<models::ForwardState> new_state() const;
  // Runs the model on a batch and records the pass in the stats file and routing trace.
  // From a thread that holds a BatchedPasses::Membership of batched_passes(), the pass runs
  // together with the other members' (batched_passes.h); a step of several passes is one
  // pass of the stats file and routing trace.
  void forward(models::ForwardState& state, std::span<const int32_t> tokens, int32_t pos0, bool all_logits, float* logits,
               models::ForwardTiming* timing);

  BatchedPasses& batched_passes() { return *batched_; }

  // Paged mode only (null otherwise).
  const pager::Pager* pager() const { return pager_.get(); }
  const MemoryPlan* plan() const { return plan_ ? &*plan_ : nullptr; }
  // One line: hit %, MiB read per token (over `tokens` evaluated), evictions, arena coverage.
  std::string pager_summary(int64_t tokens) const;
  // off, gate or history.
  std::string prefetch_name() const;
  // With --route-trace: the trace and its mapping, in one line (else empty).
  std::string route_replay() const;

 private:
  EngineOptions options_;
  gguf::File file_;
  std::optional<text::Tokenizer> tokenizer_;
  std::optional<MemoryPlan> plan_;
  std::unique_ptr<pager::ShardFiles> source_;
  std::unique_ptr<ResidentLoader> resident_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::ExpertSource> resident_experts_;
  std::unique_ptr<pager::Pager> pager_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PassLog> pass_log_;
  std::unique_ptr<RoutingRecorder> recorder_;
  std::unique_ptr<RouteReplayer> replayer_;
  std::unique_ptr<BatchedPasses> batched_;

  // A pass (or a step of batched passes): the expert source for it, and its record.
  models::ExpertSource& open_pass(int64_t n_tokens, int32_t pos0);
  void close_pass(int64_t n_tokens);
  pager::PagerStats pass_before_;
  std::chrono::steady_clock::time_point pass_start_;
};

inline constexpr int kMaxContext = 1 << 24;  // tokens
inline constexpr int kMaxThreads = 4096;
inline constexpr int kMaxParallel = 64;  // sequences decoding together (serve --parallel)
inline constexpr uint64_t kMaxBudget = uint64_t{1} << 50;  // 1 PiB: larger is a typo

// A budget such as "8G" or "512M" (1 byte to kMaxBudget); `what` names it in the error.
uint64_t parse_budget(const std::string& text, const std::string& what);
// Reads the budget from EPQ_RAM_BUDGET_MB when no --ram-budget was given.
std::optional<uint64_t> budget_from_environment();
// Checks options and fills in defaults: threads (at most the CPUs this process may run
// on), the budget from the environment, a batch no longer than the context, prefetch.
EngineOptions resolve(EngineOptions options);

}  // namespace epq::runtime
