#pragma once
// --stats-file: one JSON line per forward pass with the pager's counters for that pass.
//   {"pass":12,"tokens":1,"hits":300,"misses":84,"evictions":{"stale_left":..,"stale_right":..,
//    "current_left":..,"current_right":..},"bytes_read":..,"io_wait_ms":..,"compute_ms":..}
#include <cstdio>
#include <string>

#include "pager/pager_stats.h"

namespace epq::runtime {

class PassLog {
 public:
  explicit PassLog(const std::string& path);
  ~PassLog();
  PassLog(const PassLog&) = delete;
  PassLog& operator=(const PassLog&) = delete;
  // `pass` holds the counters of this pass only; total_ms is the pass's wall time.
  void record(int64_t tokens, const pager::PagerStats& pass, double total_ms);

 private:
  std::FILE* out_;
  int64_t n_ = 0;
};

}  // namespace epq::runtime
