// `epq limit`: run any command under a kernel memory limit and report its peak memory.
#include <fmt/core.h>

#include "app/commands.h"
#include "util/error.h"
#include "util/format.h"
#include "util/memory_limit.h"

namespace epq::app {
namespace {

struct LimitArgs {
  std::string memory;
  std::vector<std::string> command;
};

int run(const LimitArgs& a) {
  auto bytes = parse_size(a.memory);
  if (!bytes || *bytes == 0) fail("--memory: expected a size such as 4G, got '{}'", a.memory);
  const LimitedRun r = run_with_memory_limit(a.command, *bytes);
  fmt::print(stderr, "epq limit: {} under {} ({}): peak RSS {} ({} bytes){}{}\n",
             r.signal ? fmt::format("killed by signal {}", r.signal) : fmt::format("exit {}", r.exit_code), format_bytes(*bytes),
             r.mechanism, format_bytes(r.peak_rss), r.peak_rss,
             r.cgroup_peak ? fmt::format(", cgroup peak {} ({} bytes)", format_bytes(r.cgroup_peak), r.cgroup_peak) : "",
             r.killed_by_limit ? ", killed by the memory limit" : "");
  return r.signal ? 128 + r.signal : r.exit_code;
}

}  // namespace

void add_limit_command(CLI::App& root) {
  auto args = std::make_shared<LimitArgs>();
  CLI::App* c = root.add_subcommand("limit", "Run a command under a kernel memory limit (cgroup, else prlimit) and report its peak");
  c->add_option("--memory", args->memory, "The limit, e.g. 4G")->required();
  c->add_option("command", args->command, "The command and its arguments (after --)")->required();
  c->callback([args] {
    const int rc = run(*args);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace epq::app
