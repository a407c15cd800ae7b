#include "util/memory_limit.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "util/error.h"

namespace epq {
namespace {

struct Cgroup {
  std::string dir;      // the group created for the child
  bool v2 = false;
  std::string failure;  // why no group could be made
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool write_text(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// The directory of this process's memory cgroup (v1) or unified cgroup (v2).
std::string own_cgroup(bool* v2) {
  std::istringstream lines(read_text("/proc/self/cgroup"));
  std::string line, unified;
  while (std::getline(lines, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.find("memory") != std::string::npos) {
      *v2 = false;
      return "/sys/fs/cgroup/memory" + path;
    }
    if (controllers.empty()) unified = "/sys/fs/cgroup" + path;
  }
  *v2 = true;
  return unified;
}

Cgroup make_cgroup(uint64_t limit) {
  static std::atomic<int> counter{0};
  Cgroup g;
  const std::string parent = own_cgroup(&g.v2);
  if (parent.empty()) {
    g.failure = "no memory cgroup found in /proc/self/cgroup";
    return g;
  }
  const std::string dir = parent + "/epq-limit-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  if (::mkdir(dir.c_str(), 0755) != 0) {
    g.failure = "cannot create a cgroup under " + parent + ": " + std::strerror(errno);
    return g;
  }
  const std::string file = dir + (g.v2 ? "/memory.max" : "/memory.limit_in_bytes");
  if (!write_text(file, std::to_string(limit))) {
    g.failure = "cannot set " + file + ": " + std::strerror(errno);
    ::rmdir(dir.c_str());
    return g;
  }
  if (g.v2) write_text(dir + "/memory.swap.max", "0");
  g.dir = dir;
  return g;
}

uint64_t read_number(const std::string& path) {
  std::istringstream in(read_text(path));
  uint64_t v = 0;
  in >> v;
  return v;
}

// "Key: value" lines (/proc/meminfo, memory.stat), value of `key` or 0.
uint64_t read_field(const std::string& path, const std::string& key) {
  std::istringstream in(read_text(path));
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

// What a group's limit leaves: limit - (usage - page cache); no value when it has no limit
// (v1 writes a number near 2^63 for that, which leaves the system's figure the smaller).
std::optional<uint64_t> cgroup_headroom(const std::string& dir, bool v2) {
  const uint64_t limit = read_number(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
  if (limit == 0) return std::nullopt;  // "max", or no such file
  const uint64_t usage = read_number(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
  const uint64_t cache = read_field(dir + "/memory.stat", v2 ? "file" : "total_cache");
  const uint64_t used = usage > cache ? usage - cache : 0;
  return limit > used ? limit - used : 0;
}

}  // namespace

uint64_t available_memory() {
  uint64_t available = read_field("/proc/meminfo", "MemAvailable:") * 1024;
  bool v2 = false;
  std::string dir = own_cgroup(&v2);
  const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
  while (dir.size() > root.size() && dir.starts_with(root)) {
    if (const std::optional<uint64_t> headroom = cgroup_headroom(dir, v2)) available = std::min(available, *headroom);
    dir = dir.substr(0, dir.rfind('/'));
  }
  return available;
}

std::string memory_limit_mechanism() {
  Cgroup g = make_cgroup(uint64_t{1} << 40);
  if (g.dir.empty()) return "prlimit (RLIMIT_DATA; anonymous memory only) because " + g.failure;
  ::rmdir(g.dir.c_str());
  return g.v2 ? "cgroup v2 memory.max" : "cgroup v1 memory.limit_in_bytes";
}

LimitedRun run_with_memory_limit(const std::vector<std::string>& argv, uint64_t limit, const std::string& stdout_path,
                                 const std::string& stderr_path) {
  if (argv.empty()) fail("no command to run");
  LimitedRun r;
  Cgroup g;
  if (limit > 0) {
    g = make_cgroup(limit);
    r.mechanism = g.dir.empty() ? "prlimit (RLIMIT_DATA; anonymous memory only) because " + g.failure
                                : (g.v2 ? "cgroup v2 memory.max" : "cgroup v1 memory.limit_in_bytes");
  } else {
    r.mechanism = "no limit";
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string procs = g.dir + "/cgroup.procs";
  const pid_t pid = fork();
  if (pid < 0) fail("fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    // Child: join the limit, then become the command. Only async-signal-safe calls here.
    if (!g.dir.empty()) {
      const int fd = ::open(procs.c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, "0", 1) != 1) _exit(125);
      ::close(fd);
    } else if (limit > 0) {
      const rlimit rl{limit, limit};
      if (setrlimit(RLIMIT_DATA, &rl) != 0) _exit(125);
    }
    for (const auto& [path, target] : {std::pair{stdout_path.c_str(), STDOUT_FILENO}, std::pair{stderr_path.c_str(), STDERR_FILENO}}) {
      if (*path == '\0') continue;
      // Not through a planted link, and never blocking on a planted FIFO.
      const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
      if (fd < 0 || dup2(fd, target) < 0) _exit(125);
    }
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  r.peak_rss = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  if (!g.dir.empty()) {
    if (g.v2) {
      r.cgroup_peak = read_number(g.dir + "/memory.peak");
      r.killed_by_limit = read_field(g.dir + "/memory.events", "oom_kill") > 0;
    } else {
      r.cgroup_peak = read_number(g.dir + "/memory.max_usage_in_bytes");
      r.killed_by_limit = read_field(g.dir + "/memory.oom_control", "oom_kill") > 0;
    }
    ::rmdir(g.dir.c_str());
  } else if (limit > 0) {
    r.killed_by_limit = r.signal == SIGKILL || r.signal == SIGSEGV || r.signal == SIGABRT;
  }
  if (r.exit_code == 125) fail("could not apply the memory limit to the child ({})", r.mechanism);
  if (r.exit_code == 127) fail("cannot run '{}'", argv[0]);
  return r;
}

}  // namespace epq
