#pragma once
// The pager's own accounting. Counters only grow; a caller takes differences between two
// snapshots to get per-pass figures.
#include <cstdint>

namespace epq::pager {

struct PagerStats {
  uint64_t requests = 0;  // experts requested (a layer's distinct experts, per request)
  uint64_t hits = 0;      // already in the arena
  uint64_t misses = 0;    // read from the file
  uint64_t evictions_stale_left = 0, evictions_stale_right = 0;
  uint64_t evictions_current_left = 0, evictions_current_right = 0;
  uint64_t bytes_read = 0;   // bytes the pager asked the file for (aligned ranges)
  uint64_t reads = 0;        // read requests issued
  double io_wait_ms = 0;     // time next() spent blocked waiting for reads
  // Prefetch (--prefetch): experts read ahead of their request (their bytes are also in
  // bytes_read), and how many of them a request then asked for before they were evicted
  // (each also counted as a hit).
  uint64_t prefetched = 0, prefetch_used = 0, prefetch_bytes = 0;
  // The predictor: experts it named for a layer, and how many of them the layer asked for.
  uint64_t predicted = 0, predicted_right = 0;

  uint64_t evictions() const { return evictions_stale_left + evictions_stale_right + evictions_current_left + evictions_current_right; }
  PagerStats operator-(const PagerStats& o) const {
    return {requests - o.requests, hits - o.hits, misses - o.misses, evictions_stale_left - o.evictions_stale_left,
            evictions_stale_right - o.evictions_stale_right, evictions_current_left - o.evictions_current_left,
            evictions_current_right - o.evictions_current_right, bytes_read - o.bytes_read, reads - o.reads,
            io_wait_ms - o.io_wait_ms, prefetched - o.prefetched, prefetch_used - o.prefetch_used, prefetch_bytes - o.prefetch_bytes,
            predicted - o.predicted, predicted_right - o.predicted_right};
  }
};

}  // namespace epq::pager
