#pragma once
// Server counters for GET /metrics, in the Prometheus text format: requests, tokens and
// throughput, queue depth, and the pager's hits, misses, bytes read, evictions and arena.
#include <cstdint>
#include <mutex>
#include <string>

#include "pager/pager_stats.h"
#include "runtime/batched_passes.h"

namespace epq::server {

class Metrics {
 public:
  void request(bool chat);
  void failure(int status);
  // After a generation: its token counts and times, and the pager's counters then.
  void generation(int prompt_tokens, double prompt_seconds, int generated_tokens, double generation_seconds,
                  const pager::PagerStats* pager);
  // The queue now (queued + running, and running), the batched passes' counts, the arena.
  std::string render(size_t queue_depth, size_t running, const runtime::BatchedPasses::Counts& steps, uint64_t arena_bytes) const;

 private:
  mutable std::mutex mu_;
  uint64_t chat_requests_ = 0, completion_requests_ = 0, client_errors_ = 0, server_errors_ = 0;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  double prompt_seconds_ = 0, generation_seconds_ = 0;
  double last_prompt_tps_ = 0, last_generation_tps_ = 0;
  pager::PagerStats pager_;
  bool paged_ = false;
};

}  // namespace epq::server
