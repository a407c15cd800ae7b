// Buffer: zero-filled, committed memory, in transparent huge pages where the kernel allows.
#include "util/buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "util/process_memory.h"

namespace epq {
namespace {

// The "THPeligible" field of the mapping in /proc/self/smaps that holds `address`: 1 when
// the kernel may back it with transparent huge pages, -1 when there is no such mapping.
int thp_eligible(const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2) {
      inside = start <= at && at < end;
    } else if (inside && line.starts_with("THPeligible:")) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}

// The active choice in /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never").
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::stringstream text;
  text << f.rdbuf();
  const std::string s = text.str();
  const size_t open = s.find('['), close = s.find(']');
  return open == std::string::npos || close == std::string::npos ? "never" : s.substr(open + 1, close - open - 1);
}

TEST(Buffer, ZeroFilledAndCommittedAtCreation) {
  const uint64_t before = read_process_memory().rss_anon;
  Buffer b(size_t{64} << 20);
  const uint64_t after = read_process_memory().rss_anon;
  EXPECT_GE(after - before, uint64_t{60} << 20);
  for (size_t i = 0; i < b.size(); i += 4093) ASSERT_EQ(b.data()[i], 0) << i;
}

TEST(Buffer, LargeRegionsAskForHugePagesWhereTheKernelHasThem) {
  Buffer large(size_t{8} << 20);
  const std::string mode = thp_mode();
  // "madvise" grants huge pages only to regions that asked for them.
  EXPECT_EQ(thp_eligible(large.data()), mode == "never" ? 0 : 1) << "transparent huge pages: " << mode;
}

}  // namespace
}  // namespace epq
