#pragma once
// Measures how fast a file can be read in requests of a given size and queue depth,
// through the same I/O engine the pager uses: random aligned offsets over the whole file,
// so the page cache cannot help (buffered reads drop their pages as the pager does).
#include <cstdint>
#include <string>

namespace epq::pager {

struct ProbeResult {
  uint64_t request_bytes = 0;
  int depth = 0;
  bool direct = false;
  uint64_t bytes = 0;
  double seconds = 0;
  double bytes_per_second() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }
};

// Whether O_DIRECT reads work on the file's filesystem; `reason` says why not.
bool direct_io_works(const std::string& path, std::string* reason);

// Reads for about `seconds` (and at most 4 GiB or the file's size twice over).
ProbeResult probe_read_rate(const std::string& path, uint64_t request_bytes, int depth, bool direct, double seconds);

}  // namespace epq::pager
