#pragma once
// A run's measurements as one JSON object: what `epq run --report-json FILE` writes and
// `epq bench` reads back from each child process.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pager/pager_stats.h"

namespace epq::runtime {

class Engine;
struct GenerateResult;

struct RunReport {
  int prompt_tokens = 0;
  int generated_tokens = 0;
  double prompt_tps = 0;
  double decode_tps = 0;  // tokens after the first, over the time after the first
  uint64_t peak_rss = 0;
  uint64_t anon_rss = 0;  // at the end of the run (EPQ allocates its memory before the first token)
  bool paged = false;
  uint64_t arena_bytes = 0;
  std::vector<int64_t> slots;  // per size class
  double coverage = 0;
  uint64_t requests = 0, hits = 0, misses = 0, evictions = 0, bytes_read = 0;
  double io_wait_ms = 0;
  // The same counters for the generation phase only (after the prompt).
  uint64_t decode_requests = 0, decode_hits = 0, decode_bytes_read = 0;
  std::string prefetch = "off";  // off, gate or history
  uint64_t decode_prefetched = 0, decode_prefetch_used = 0;
  uint64_t decode_predicted = 0, decode_predicted_right = 0;  // the predictor's accuracy in decode
  std::string route_trace;  // set when the routing was replayed from a trace (Engine::route_replay)
  std::string io_backend;
  std::string policy;
  int n_expert_used = 0;

  nlohmann::json to_json() const;
  static RunReport from_json(const nlohmann::json& j);
};

// after_prompt: the pager's counters when the prompt had been evaluated.
RunReport make_run_report(const Engine& engine, const GenerateResult& result, const pager::PagerStats& after_prompt);

}  // namespace epq::runtime
