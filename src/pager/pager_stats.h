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

  uint64_t evictions() const { return evictions_stale_left + evictions_stale_right + evictions_current_left + evictions_current_right; }
  PagerStats operator-(const PagerStats& o) const {
    return {requests - o.requests, hits - o.hits, misses - o.misses, evictions_stale_left - o.evictions_stale_left,
            evictions_stale_right - o.evictions_stale_right, evictions_current_left - o.evictions_current_left,
            evictions_current_right - o.evictions_current_right, bytes_read - o.bytes_read, reads - o.reads,
            io_wait_ms - o.io_wait_ms};
  }
};

}  // namespace epq::pager
