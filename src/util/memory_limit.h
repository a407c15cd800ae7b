#pragma once
// Runs a command under a kernel-enforced memory limit and reports its peak. The limit is
// a cgroup created under this process's own (v1 memory.limit_in_bytes, or v2 memory.max)
// when one is writable; otherwise RLIMIT_DATA via setrlimit, which bounds anonymous
// memory only. `mechanism` says which was used, and why when it fell back. Also: the
// memory the kernel can still give this process.
#include <cstdint>
#include <string>
#include <vector>

namespace epq {

struct LimitedRun {
  int exit_code = -1;        // when it exited
  int signal = 0;            // when it was killed
  bool killed_by_limit = false;
  uint64_t peak_rss = 0;     // the child's VmHWM as the kernel reports it (getrusage)
  uint64_t cgroup_peak = 0;  // the cgroup's peak usage (page cache included), 0 without a cgroup
  std::string mechanism;
};

// Memory this process can still get without swapping or an OOM kill: the system's
// MemAvailable, or less where the limit of its memory cgroup or of one above it leaves
// less (counting the group's page cache as reclaimable).
uint64_t available_memory();

// Describes the mechanism run_with_memory_limit will use, without running anything.
std::string memory_limit_mechanism();

// stdout_path/stderr_path: where the child's output goes ("" = inherit). A limit of 0
// runs the command without one (for comparison runs), still reporting its peak.
LimitedRun run_with_memory_limit(const std::vector<std::string>& argv, uint64_t limit_bytes, const std::string& stdout_path = "",
                                 const std::string& stderr_path = "");

}  // namespace epq
