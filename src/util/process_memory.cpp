#include "util/process_memory.h"

#include <fstream>
#include <string>

namespace epq {

ProcessMemory read_process_memory() {
  ProcessMemory m;
  std::ifstream in("/proc/self/status");
  std::string key;
  uint64_t kib;
  while (in >> key) {
    if (key == "VmRSS:" && in >> kib) m.rss = kib << 10;
    else if (key == "VmHWM:" && in >> kib) m.peak_rss = kib << 10;
    else if (key == "RssAnon:" && in >> kib) m.rss_anon = kib << 10;
    else if ((key == "RssFile:" || key == "RssShmem:") && in >> kib) m.rss_file += kib << 10;
    in.ignore(1 << 16, '\n');
  }
  return m;
}

}  // namespace epq
