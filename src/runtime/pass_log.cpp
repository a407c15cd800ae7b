#include "runtime/pass_log.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace epq::runtime {

PassLog::PassLog(const std::string& path) : out_(std::fopen(path.c_str(), "w")) {
  if (out_ == nullptr) fail("cannot create stats file {}: {}", path, std::strerror(errno));
}

PassLog::~PassLog() { std::fclose(out_); }

void PassLog::record(int64_t tokens, const pager::PagerStats& s, double total_ms) {
  fmt::print(out_,
             "{{\"pass\":{},\"tokens\":{},\"hits\":{},\"misses\":{},\"evictions\":{{\"stale_left\":{},\"stale_right\":{},"
             "\"current_left\":{},\"current_right\":{}}},\"bytes_read\":{},\"io_wait_ms\":{:.3f},\"compute_ms\":{:.3f}}}\n",
             n_++, tokens, s.hits, s.misses, s.evictions_stale_left, s.evictions_stale_right, s.evictions_current_left,
             s.evictions_current_right, s.bytes_read, s.io_wait_ms, std::max(0.0, total_ms - s.io_wait_ms));
  std::fflush(out_);
}

}  // namespace epq::runtime
