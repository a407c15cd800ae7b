#pragma once
// This process's memory as the kernel reports it (/proc/self/status), in bytes.
#include <cstdint>

namespace epq {

struct ProcessMemory {
  uint64_t rss = 0;       // VmRSS: resident now, anonymous + file-backed
  uint64_t peak_rss = 0;  // VmHWM: the high-water mark of VmRSS
  uint64_t rss_anon = 0;  // RssAnon
  uint64_t rss_file = 0;  // RssFile + RssShmem
};

ProcessMemory read_process_memory();

}  // namespace epq
