// `epq probe-io`: how fast the disk under a model delivers expert-sized reads.
#include <fmt/core.h>

#include <cmath>

#include "app/commands.h"
#include "app/validators.h"
#include "gguf/file.h"
#include "models/tensor_role.h"
#include "pager/io_probe.h"
#include "util/error.h"
#include "util/format.h"

namespace epq::app {
namespace {

struct ProbeArgs {
  std::string file;
  std::string size;
  std::vector<int> depths = {1, 2, 4, 8, 16, 32, 64};
  double seconds = 0.5;
  bool no_buffered = false;
};

// The mean size of one expert matrix in a GGUF file (the pager's read size), or 0.
uint64_t expert_read_size(const std::string& path) {
  try {
    gguf::File f = gguf::File::open(path, gguf::File::Access::kHeaderOnly);
    uint64_t bytes = 0, count = 0;
    for (const gguf::TensorInfo& t : f.tensors()) {
      if (models::classify_tensor(t.name) != models::TensorRole::kRoutedExpert || t.dims.size() != 3) continue;
      bytes += t.bytes;
      count += static_cast<uint64_t>(t.dims[2]);
    }
    return count ? bytes / count : 0;
  } catch (const Error&) {
    return 0;  // not a GGUF file: any file can be probed
  }
}

void run(const ProbeArgs& a) {
  uint64_t size = 1 << 20;
  std::string why = "default";
  if (!a.size.empty()) {
    auto s = parse_size(a.size);
    if (!s || *s < 4096 || *s > (64u << 20) || *s % 4096 != 0) fail("--size: expected a multiple of 4K from 4K to 64M, got '{}'", a.size);
    size = *s;
    why = "--size";
  } else if (uint64_t e = expert_read_size(a.file)) {
    size = e;
    why = "the file's mean expert matrix";
  }
  std::string reason;
  const bool direct = pager::direct_io_works(a.file, &reason);
  fmt::print("{}: O_DIRECT {}\n", a.file, direct ? "works" : "does not work (" + reason + ")");
  fmt::print("request size {} ({}), random aligned offsets, {:.1f} s per point, io_uring\n\n", format_bytes(size), why, a.seconds);
  fmt::print("| queue depth | direct MB/s | buffered MB/s |\n|---:|---:|---:|\n");
  for (int depth : a.depths) {
    if (size * static_cast<uint64_t>(depth) > (1u << 30)) fail("--size x --depths must stay within 1G ({} x {})", format_bytes(size), depth);
    std::string d = "-", b = "-";
    if (direct) d = fmt::format("{:.0f}", pager::probe_read_rate(a.file, size, depth, true, a.seconds).bytes_per_second() / 1e6);
    if (!a.no_buffered) b = fmt::format("{:.0f}", pager::probe_read_rate(a.file, size, depth, false, a.seconds).bytes_per_second() / 1e6);
    fmt::print("| {} | {} | {} |\n", depth, d, b);
    std::fflush(stdout);
  }
}

}  // namespace

void add_probe_io_command(CLI::App& root) {
  auto args = std::make_shared<ProbeArgs>();
  CLI::App* c = root.add_subcommand("probe-io", "Measure O_DIRECT and buffered read throughput of a file's disk at several queue depths");
  c->add_option("file", args->file, "File to read (e.g. the model)")->required();
  c->add_option("--size", args->size, "Request size (default: the model's mean expert matrix, else 1M)");
  c->add_option("--depths", args->depths, "Queue depths to measure")->delimiter(',')->check(CLI::Range(1, 256))->capture_default_str();
  c->add_option("--seconds", args->seconds, "Seconds per measurement")->check(finite_range(0.01, 3600))->capture_default_str();
  c->add_flag("--no-buffered", args->no_buffered, "Measure direct reads only");
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
