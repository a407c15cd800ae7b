#include "util/mapping_guard.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "util/format.h"

namespace epq {
namespace {

// One guarded range. The handler reads these without locks: `begin` is published last
// (release) and cleared first, so a handler that sees it sees the rest.
struct Guard {
  std::atomic<uintptr_t> begin{0};
  uintptr_t end = 0;
  char message[512] = {};
  size_t message_size = 0;
};

Guard g_guards[kMaxGuardedMappings];
std::mutex g_mutex;  // writers only

void on_sigbus(int sig, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const Guard& g : g_guards) {
    const uintptr_t begin = g.begin.load(std::memory_order_acquire);
    if (begin != 0 && addr >= begin && addr < g.end) {
      const ssize_t written = ::write(STDERR_FILENO, g.message, g.message_size);
      (void)written;
      _exit(1);
    }
  }
  signal(sig, SIG_DFL);  // not ours: die of it as before
  raise(sig);
}

void install_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace

void guard_mapping(const void* addr, size_t size, const std::string& path) {
  static std::once_flag installed;
  std::call_once(installed, install_handler);
  std::lock_guard lock(g_mutex);
  for (Guard& g : g_guards) {
    if (g.begin.load(std::memory_order_relaxed) != 0) continue;
    const std::string text = "epq: error: " + printable(path, 300) +
                             ": the file shrank or was replaced while its mapping was in use (SIGBUS reading it); restore the "
                             "file and start again\n";
    g.message_size = std::min(text.size(), sizeof g.message);
    std::memcpy(g.message, text.data(), g.message_size);
    g.end = reinterpret_cast<uintptr_t>(addr) + size;
    g.begin.store(reinterpret_cast<uintptr_t>(addr), std::memory_order_release);
    return;
  }
}

void unguard_mapping(const void* addr) {
  std::lock_guard lock(g_mutex);
  for (Guard& g : g_guards) {
    if (g.begin.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(addr)) g.begin.store(0, std::memory_order_release);
  }
}

}  // namespace epq
