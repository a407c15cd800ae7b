#include "runtime/bench_sweep.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gguf/file.h"
#include "pager/io_probe.h"
#include "pager/pager.h"
#include "runtime/engine.h"
#include "runtime/memory_plan.h"
#include "runtime/replay.h"
#include "runtime/routing_trace.h"
#include "util/error.h"
#include "util/format.h"

namespace epq::runtime {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) fail("cannot find the epq executable (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

// Why a child failed, from its exit and its last line of stderr.
std::string failure_reason(const LimitedRun& p, const std::string& stderr_text) {
  const size_t at = stderr_text.find("below the minimum of ");
  if (at != std::string::npos) {
    const size_t start = at + std::strlen("below the minimum of ");
    return "refused: minimum budget " + stderr_text.substr(start, stderr_text.find(" for", start) - start);
  }
  if (p.killed_by_limit) return "killed by the memory limit";
  if (p.signal) return "killed by signal " + std::to_string(p.signal);
  std::string line = last_line(stderr_text);
  if (line.rfind("epq: error: ", 0) == 0) line = line.substr(12);
  return "error: " + line;
}

// The smallest budget that holds every expert, planned in this process with a margin for
// the child measuring itself slightly larger.
uint64_t all_fit_budget(const BenchOptions& o, int expert_used) {
  EngineOptions e;
  e.model_path = o.model;
  e.n_ctx = o.n_ctx;
  e.n_threads = o.n_threads;
  e.ram_budget = uint64_t{1} << 40;
  e = resolve(e);
  gguf::File file = gguf::File::open(o.model, gguf::File::Access::kHeaderOnly);
  const models::ModelOptions mo{expert_used > 0 ? std::optional<int>(expert_used) : std::nullopt};
  const models::ModelInfo info = models::read_model_info(file, mo);
  file.unmap();
  const MemoryPlan plan = plan_memory_now(file, info, mo, {*e.ram_budget, e.n_ctx, e.n_batch, e.n_threads, e.io});
  return plan.all_fit_budget + (8ull << 20);
}

std::vector<double> passed_values(const BenchResult& r, double RunReport::*field) {
  std::vector<double> v;
  for (const BenchRun& run : r.runs) {
    if (run.report) v.push_back((*run.report).*field);
  }
  std::sort(v.begin(), v.end());
  return v;
}

// Belady's MIN replayed on a run's routing at the run's slots: MiB it reads per decode
// token (the passes after the first, which is the prompt).
double belady_decode_mib_per_token(const std::string& trace_path, const RunReport& report) {
  const RoutingTrace trace = read_routing_trace(trace_path);
  if (trace.passes.size() < 2 || report.prompt_tokens > trace.passes[0].n_tokens) return NAN;
  pager::PagerStats after_prompt;
  const pager::PagerStats total =
      replay_trace(trace, trace_size_classes(trace.header), report.slots, make_belady_policy(trace), &after_prompt);
  return static_cast<double>((total - after_prompt).bytes_read) / static_cast<double>(trace.passes.size() - 1) / (1 << 20);
}

double median(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

std::string BenchConfig::policy() const { return prefetch == "off" ? evict : evict + " + " + prefetch + " prefetch"; }

std::string BenchConfig::series() const {
  std::string s = budget_label == "ram" ? "all in RAM" : policy();
  if (expert_used > 0) s += ", top-" + std::to_string(expert_used);
  return s;
}

bool BenchResult::passed() const { return !runs.empty() && std::all_of(runs.begin(), runs.end(), [](const BenchRun& r) { return r.report.has_value(); }); }

std::string BenchResult::status() const {
  for (const BenchRun& r : runs) {
    if (!r.report) return "FAIL (" + r.failure + ")";
  }
  return runs.empty() ? "FAIL (no runs)" : "PASS";
}

double BenchResult::median_decode() const { return median(passed_values(*this, &RunReport::decode_tps)); }
double BenchResult::min_decode() const { auto v = passed_values(*this, &RunReport::decode_tps); return v.empty() ? NAN : v.front(); }
double BenchResult::max_decode() const { auto v = passed_values(*this, &RunReport::decode_tps); return v.empty() ? NAN : v.back(); }
double BenchResult::median_prompt() const { return median(passed_values(*this, &RunReport::prompt_tps)); }

uint64_t BenchResult::max_peak_rss() const {
  uint64_t m = 0;
  for (const BenchRun& r : runs) m = std::max(m, r.process.peak_rss);
  return m;
}

uint64_t BenchResult::max_anon() const {
  uint64_t m = 0;
  for (const BenchRun& r : runs) {
    if (r.report) m = std::max(m, r.report->anon_rss);
  }
  return m;
}

double BenchResult::decode_mib_per_token() const {
  double bytes = 0, steps = 0;
  for (const BenchRun& r : runs) {
    if (!r.report || r.report->generated_tokens < 2) continue;
    bytes += static_cast<double>(r.report->decode_bytes_read);
    steps += r.report->generated_tokens - 1;
  }
  return steps > 0 ? bytes / steps / (1 << 20) : NAN;
}

double BenchResult::decode_hit_rate() const {
  double hits = 0, requests = 0;
  for (const BenchRun& r : runs) {
    if (!r.report) continue;
    hits += static_cast<double>(r.report->decode_hits);
    requests += static_cast<double>(r.report->decode_requests);
  }
  return requests > 0 ? hits / requests : NAN;
}

const RunReport* BenchResult::first_report() const {
  for (const BenchRun& r : runs) {
    if (r.report) return &*r.report;
  }
  return nullptr;
}

void drop_file_cache(const std::string& path) {
  ::sync();
  if (geteuid() == 0) {
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open to drop its cache", path);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

std::vector<BenchResult> run_bench(const BenchOptions& o, const std::function<void(const std::string&)>& progress) {
  if (o.runs < 1) fail("--runs must be at least 1");
  if (o.evict.empty()) fail("--evict needs at least one value");
  const std::vector<std::string> prefetch =
      o.prefetch.empty() ? std::vector<std::string>{o.route_trace.empty() ? "gate" : "off"} : o.prefetch;
  const std::string exe = self_exe();
  std::vector<BenchConfig> configs;
  for (int k : o.expert_used) {
    for (const std::string& b : o.budgets) {
      uint64_t bytes = 0;
      if (b == "all") {
        bytes = all_fit_budget(o, k);
      } else if (b != "ram") {
        bytes = parse_budget(b, "--budgets");
      }
      if (b == "ram") {  // no pager, so no policy or prefetch to vary
        configs.push_back({b, bytes, o.evict.front(), "off", k});
        continue;
      }
      for (const std::string& e : o.evict) {
        for (const std::string& p : prefetch) {
          pager::parse_prefetch(p);
          configs.push_back({b, bytes, e, p, k});
        }
      }
    }
  }
  const std::string tmp = (std::filesystem::temp_directory_path() / ("epq-bench-" + std::to_string(getpid()))).string();
  const std::string report_path = tmp + ".json", out_path = tmp + ".out", err_path = tmp + ".err", trace_path = tmp + ".trace";
  const std::vector<std::string> shards = gguf::File::open(o.model, gguf::File::Access::kHeaderOnly).shard_paths();
  std::vector<BenchResult> results;
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const BenchConfig& c = configs[ci];
    BenchResult result{c, {}, std::nullopt};
    if (o.probe_disk && c.budget > 0) {
      // Disks vary over minutes (cloud volumes especially): probe right before, with the
      // pager's read size (at most 1 MiB pieces) and queue depth.
      progress(fmt::format("[{}/{}] budget {}, {}, disk probe", ci + 1, configs.size(), c.budget_label, c.series()));
      result.disk_bytes_per_second = pager::probe_read_rate(o.model, 1 << 20, pager::IoOptions{}.queue_depth, true, 2.0).bytes_per_second();
    }
    std::vector<std::string> common = {"-m", o.model, "--ctx", std::to_string(o.n_ctx)};
    if (o.n_threads > 0) common.insert(common.end(), {"-t", std::to_string(o.n_threads)});
    if (c.expert_used > 0) common.insert(common.end(), {"--expert-used", std::to_string(c.expert_used)});
    if (c.budget > 0) common.insert(common.end(), {"--ram-budget", std::to_string(c.budget), "--evict", c.evict, "--prefetch", c.prefetch});
    if (!o.route_trace.empty()) common.insert(common.end(), {"--route-trace", o.route_trace});
    common.insert(common.end(), o.extra_args.begin(), o.extra_args.end());
    for (int r = 0; r < o.runs; ++r) {
      progress(fmt::format("[{}/{}] budget {}, {}, run {}/{}", ci + 1, configs.size(), c.budget_label, c.series(), r + 1, o.runs));
      if (o.cold) {
        for (const std::string& shard : shards) drop_file_cache(shard);
      }
      std::vector<std::string> argv = {exe, "run", "-p", o.prompt, "-n", std::to_string(o.n_predict), "--temp", "0", "--ignore-eos",
                                       "--report-json", report_path};
      // The first run's routing, for Belady's MIN at its arena.
      const bool trace = c.budget > 0 && r == 0;
      if (trace) argv.insert(argv.end(), {"--trace-routing", trace_path});
      argv.insert(argv.end(), common.begin(), common.end());
      std::remove(report_path.c_str());
      BenchRun run{run_with_memory_limit(argv, c.budget, out_path, err_path), std::nullopt, ""};
      if (run.process.exit_code == 0 && !run.process.signal) {
        run.report = RunReport::from_json(nlohmann::json::parse(read_file(report_path)));
        if (trace) result.min_mib_per_token = belady_decode_mib_per_token(trace_path, *run.report);
      } else {
        run.failure = failure_reason(run.process, read_file(err_path));
      }
      const bool refused = run.failure.rfind("refused", 0) == 0;
      result.runs.push_back(std::move(run));
      if (refused) break;  // the same every time
    }
    if (result.passed() && !o.perplexity_file.empty()) {
      progress(fmt::format("[{}/{}] budget {}, {}, perplexity", ci + 1, configs.size(), c.budget_label, c.series()));
      std::vector<std::string> argv = {exe, "perplexity", "-f", o.perplexity_file, "--all-positions"};
      argv.insert(argv.end(), common.begin(), common.end());
      // --all-positions sets the context to the text's length; drop --ctx for it.
      const auto ctx = std::find(argv.begin(), argv.end(), "--ctx");
      argv.erase(ctx, ctx + 2);
      const LimitedRun p = run_with_memory_limit(argv, c.budget, out_path, err_path);
      const std::string out = read_file(out_path);
      const size_t at = out.find("PPL = ");
      if (p.exit_code == 0 && at != std::string::npos) result.perplexity = std::stod(out.substr(at + 6));
    }
    results.push_back(std::move(result));
  }
  for (const std::string& f : {report_path, out_path, err_path, trace_path}) std::remove(f.c_str());
  return results;
}

}  // namespace epq::runtime
