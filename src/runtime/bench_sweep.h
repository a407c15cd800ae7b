#pragma once
// The strict-budget sweep behind `epq bench`: every configuration (budget x eviction
// policy x top-k) runs `epq run` in a fresh child process under a kernel memory limit
// equal to its budget, a few times, optionally from a cold page cache; the parent
// collects each child's JSON report and aggregates.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/run_report.h"
#include "util/memory_limit.h"

namespace epq::runtime {

struct BenchOptions {
  std::string model;
  std::vector<std::string> budgets = {"2G", "4G", "8G", "16G", "all"};  // sizes, "all" (every expert fits), "ram" (no paging)
  std::vector<std::string> evict = {"lrfu"};
  // Pager prefetch modes to compare in paged runs (pager::prefetch_names); empty: the
  // engine's default (gate, or off with a route trace).
  std::vector<std::string> prefetch;
  std::vector<int> expert_used = {0};  // 0: the model's own top-k
  int runs = 3;
  std::string prompt;
  int n_predict = 32;
  int n_ctx = 2048;
  int n_threads = 0;
  bool cold = false;
  std::string perplexity_file;
  std::vector<std::string> extra_args;  // passed to every child (e.g. --io pread)
  bool probe_disk = true;  // measure the disk before each paged configuration
  std::string route_trace;  // set: every run replays this routing trace (--route-trace)
};

struct BenchRun {
  LimitedRun process;
  std::optional<RunReport> report;  // set when the run passed
  std::string failure;              // why it did not
};

struct BenchConfig {
  std::string budget_label;
  uint64_t budget = 0;  // 0 for "ram"
  std::string evict;
  std::string prefetch = "off";
  int expert_used = 0;
  std::string policy() const;  // e.g. "lrfu + gate prefetch"
  std::string series() const;  // e.g. "lru, top-8" for charts
};

struct BenchResult {
  BenchConfig config;
  std::vector<BenchRun> runs;
  std::optional<double> perplexity;
  double disk_bytes_per_second = 0;  // O_DIRECT rate probed just before (0: not probed)
  // Belady's MIN on the first passed run's own routing at its arena (paged runs only):
  // bytes it would read per decode token (NAN when not computed).
  double min_mib_per_token = NAN;
  bool passed() const;
  std::string status() const;  // "PASS" or "FAIL (reason)"
  // Medians and ranges over passed runs.
  double median_decode() const, min_decode() const, max_decode() const, median_prompt() const;
  uint64_t max_peak_rss() const, max_anon() const;
  double decode_mib_per_token() const;  // pager bytes read per decode step
  double decode_hit_rate() const;
  const RunReport* first_report() const;
};

// progress(text) reports what is about to run.
std::vector<BenchResult> run_bench(const BenchOptions& options, const std::function<void(const std::string&)>& progress);

// Drops the file's pages from the page cache (and, as root, all clean caches).
void drop_file_cache(const std::string& path);

}  // namespace epq::runtime
