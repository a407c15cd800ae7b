// Two or more builds of a kernel set, timed turn about in one process: the A/B that a
// noisy machine allows. On a shared 2-core guest the same binary ran 1.5-2x faster or
// slower from one second to the next (docs/PERFORMANCE.md, stop 62); with each build
// timed in turn every few milliseconds, both see the same machine, and the ratio holds.
//
// Each LIB is a shared object built from one revision's kernel file by
// scripts/kernel_ab.sh, which gives its kernel set through the set's usual function.
// For each type, the same weights and activations go to every LIB's kernel for that type
// (--trials rounds, each LIB --iters calls in turn); printed: the best and the
// first-quartile GMAC/s of each, the weight bytes per second at the best, its ratio to
// the first LIB, and whether its outputs differ from the first LIB's in any bit.
//
//   build/bench/epq_kernel_ab [--set avx2] [--types "Q4_0 Q8_0"] [--cols 2048] [--rows 96]
//       [--columns 1] [--threads 1] [--iters 20] [--trials 300] [--rows4] LIB...
//
// --rows 96 x --cols 2048 keeps the weights in L2 (compute speed); --rows 65536 --cols
// 4096 --iters 1 --trials 30 reads them from DRAM. --rows4: every LIB after the first
// reads the weights in the four-row layout (quant/rows4_layout.h) that its set takes.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "quant/activation.h"
#include "quant/cpu_features.h"
#include "quant/dot.h"
#include "quant/reference.h"
#include "quant/rows4_layout.h"
#include "quant/types.h"
#include "util/buffer.h"

namespace {

using epq::quant::KernelSet;
using epq::quant::Type;

struct Options {
  std::string set = "avx2";
  std::vector<std::string> types = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "MXFP4"};
  int64_t cols = 2048, rows = 96;
  int columns = 1, threads = 1, iters = 20, trials = 300;
  bool rows4 = false;
  std::vector<std::string> libs;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "epq_kernel_ab: %s\nusage: epq_kernel_ab [--set avx2|avx512|avx512-full-width] [--types \"T ...\"] "
                       "[--cols N] [--rows N] [--columns C] [--threads T] [--iters N] [--trials N] [--rows4] LIB...\n", why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("no value after " + a).c_str());
      return argv[++i];
    };
    auto number = [&]() -> int64_t {
      const std::string v = value();
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (*end != '\0' || n < 1) usage((a + " takes a positive number, not " + v).c_str());
      return n;
    };
    if (a == "--set") {
      o.set = value();
    } else if (a == "--types") {
      std::istringstream in(value());
      o.types.clear();
      for (std::string t; in >> t;) o.types.push_back(t);
    } else if (a == "--cols") {
      o.cols = number();
    } else if (a == "--rows") {
      o.rows = number();
    } else if (a == "--columns") {
      o.columns = static_cast<int>(std::min<int64_t>(number(), epq::quant::kMaxCols));
    } else if (a == "--threads") {
      o.threads = static_cast<int>(number());
    } else if (a == "--iters") {
      o.iters = static_cast<int>(number());
    } else if (a == "--trials") {
      o.trials = static_cast<int>(number());
    } else if (a == "--rows4") {
      o.rows4 = true;
    } else if (a.rfind("--", 0) == 0) {
      usage(("unknown option " + a).c_str());
    } else {
      o.libs.push_back(a);
    }
  }
  if (o.libs.empty()) usage("no LIB given");
  return o;
}

// The kernel set of the shared object at `path`, built from a revision's kernel file.
const KernelSet* load_set(const std::string& path, const std::string& set) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) usage(dlerror());
  if (set == "avx2") {
    auto* fn = reinterpret_cast<const KernelSet* (*)()>(dlsym(lib, "_ZN3epq5quant12avx2_kernelsEv"));
    if (fn == nullptr) usage((path + " has no avx2_kernels()").c_str());
    const KernelSet* s = fn();
    if (s == nullptr) usage("this CPU has no AVX2");
    return s;
  }
  if (set != "avx512" && set != "avx512-full-width") usage(("unknown set " + set).c_str());
  if (!epq::quant::cpu_features().avx512_vnni) usage("this CPU has no AVX-512");
  auto* fn = reinterpret_cast<const KernelSet& (*)(epq::quant::Avx512Set)>(
      dlsym(lib, "_ZN3epq5quant24avx512_kernels_uncheckedENS0_9Avx512SetE"));
  if (fn == nullptr) usage((path + " has no avx512_kernels_unchecked()").c_str());
  return &fn(set == "avx512" ? epq::quant::Avx512Set::kSplitUnits : epq::quant::Avx512Set::kFullWidth);
}

Type type_named(const std::string& name) {
  const std::optional<Type> t = epq::quant::type_from_name(name);
  if (!t) usage(("unknown type " + name).c_str());
  return *t;
}

void compare(const Options& o, const std::vector<const KernelSet*>& sets, Type t) {
  const int64_t n = o.cols, rows = o.rows;
  if (n % epq::quant::info(t).block_elems != 0) {
    usage(("--cols must be a multiple of " + std::to_string(epq::quant::info(t).block_elems) + " for " + epq::quant::name(t)).c_str());
  }
  const size_t row_bytes = epq::quant::row_bytes(t, n);
  // A random 4096-row tile, repeated: the content does not change the speed.
  const int64_t tile_rows = std::min<int64_t>(rows, 4096);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(static_cast<size_t>(tile_rows * n));
  for (float& v : x) v = normal(rng);
  // Page-aligned, as the engine's weights are.
  const epq::Buffer file(rows * row_bytes);
  epq::quant::quantize_row(t, x.data(), file.data(), tile_rows * n);
  for (int64_t r = tile_rows; r < rows; r += tile_rows) {
    std::memcpy(file.data() + r * row_bytes, file.data(), static_cast<size_t>(std::min(tile_rows, rows - r)) * row_bytes);
  }
  epq::Buffer packed;
  if (o.rows4) {
    if (epq::quant::dot_kernel_rows4(*sets.back(), t) == nullptr) {
      usage((std::string("the last LIB's set reads no four-row layout for ") + epq::quant::name(t)).c_str());
    }
    packed = epq::Buffer(rows * row_bytes);
    std::memcpy(packed.data(), file.data(), rows * row_bytes);
    epq::quant::to_rows4_layout(t, packed.data(), rows, n, *sets.back());
  }
  const epq::quant::ActFormat f = epq::quant::activation_format(t);
  const size_t act_bytes = epq::quant::activation_bytes(f, n);
  std::vector<uint8_t> act(act_bytes * o.columns);
  std::vector<float> xa(static_cast<size_t>(n));
  for (int c = 0; c < o.columns; ++c) {
    for (float& v : xa) v = normal(rng);
    epq::quant::quantize_activation(f, xa.data(), act.data() + c * act_bytes, n);
  }
  std::vector<std::vector<float>> out(sets.size(), std::vector<float>(static_cast<size_t>(rows * o.columns)));
  std::vector<std::vector<double>> seconds(sets.size());
  for (int trial = 0; trial < o.trials; ++trial) {
    for (size_t s = 0; s < sets.size(); ++s) {
      const bool rows4 = o.rows4 && s > 0;
      const epq::quant::DotKernel kernel = (rows4 ? sets[s]->dot_rows4 : sets[s]->dot)[static_cast<uint32_t>(t)];
      if (kernel == nullptr) usage((std::string("no kernel for ") + epq::quant::name(t) + (rows4 ? " in the four-row layout" : "")).c_str());
      const uint8_t* w = rows4 ? packed.data() : file.data();
      // Thread k takes its share of the rows in tiles of 32, as run_matmuls does.
      auto rows_of = [&](int k) {
        const int64_t first = rows * k / o.threads / 32 * 32, end = k + 1 == o.threads ? rows : rows * (k + 1) / o.threads / 32 * 32;
        for (int i = 0; i < o.iters; ++i) {
          for (int64_t r = first; r < end; r += 32) {
            kernel(n, w + r * row_bytes, row_bytes, std::min<int64_t>(32, end - r), act.data(), act_bytes, o.columns, out[s].data() + r, rows);
          }
        }
      };
      const auto start = std::chrono::steady_clock::now();
      if (o.threads == 1) {
        rows_of(0);
      } else {
        std::vector<std::thread> pool;
        for (int k = 0; k < o.threads; ++k) pool.emplace_back(rows_of, k);
        for (std::thread& th : pool) th.join();
      }
      seconds[s].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  const double macs = static_cast<double>(rows * n * o.columns) * o.iters;
  std::printf("%-7s", epq::quant::name(t));
  double first_best = 0;
  for (size_t s = 0; s < sets.size(); ++s) {
    std::sort(seconds[s].begin(), seconds[s].end());
    const double best = macs / seconds[s].front() / 1e9, quartile = macs / seconds[s][seconds[s].size() / 4] / 1e9;
    if (s == 0) first_best = best;
    const bool same = std::memcmp(out[s].data(), out[0].data(), out[0].size() * sizeof(float)) == 0;
    std::printf("  %6.1f %6.1f %5.1f GB/s %5.2fx%s", best, quartile, best / static_cast<double>(n * o.columns) * static_cast<double>(row_bytes),
                best / first_best, same ? "" : " bits differ");
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::vector<const KernelSet*> sets;
  for (const std::string& lib : o.libs) sets.push_back(load_set(lib, o.set));
  std::printf("# set %s, %lld rows x %lld columns, %d column(s) a call, %d thread(s); per LIB: best and first-quartile GMAC/s,\n"
              "# weight bytes per second at the best, ratio to the first LIB\n",
              o.set.c_str(), static_cast<long long>(o.rows), static_cast<long long>(o.cols), o.columns, o.threads);
  for (const std::string& t : o.types) compare(o, sets, type_named(t));
}
