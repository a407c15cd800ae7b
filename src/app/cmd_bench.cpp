// `epq bench`: the strict-budget sweep as one command, with a Markdown table, raw JSON
// and an SVG chart.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "app/commands.h"
#include "pager/io_probe.h"
#include "pager/pager.h"
#include "quant/dot.h"
#include "runtime/bench_sweep.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "util/error.h"
#include "util/format.h"
#include "util/memory_limit.h"
#include "util/progress.h"
#include "util/svg_chart.h"

namespace epq::app {
namespace {

const char* const kDefaultPrompt =
    "The river ran past the old mill and under the stone bridge, where the children of the village used to gather in the long "
    "summer evenings.";

struct BenchArgs {
  runtime::BenchOptions options;
  std::string json_path;
  std::string svg_path;
  bool quiet = false;
};

std::string cell(double v, const char* format = "{:.2f}") { return std::isnan(v) ? "-" : fmt::format(fmt::runtime(format), v); }

void print_table(const BenchArgs& a, const std::vector<runtime::BenchResult>& results) {
  const runtime::BenchOptions& o = a.options;
  double ram_decode = NAN;
  for (const auto& r : results) {
    if (r.config.budget_label == "ram" && r.passed()) ram_decode = r.median_decode();
  }
  fmt::print("## epq bench: {}\n\n", o.model);
  fmt::print("- memory limit per run: {} (the `ram` row, if any, runs without one)\n", memory_limit_mechanism());
  fmt::print("- page cache: {}\n", o.cold ? "cold (dropped before every run)" : "warm (not dropped)");
  fmt::print("- dot kernels: {} (EPQ_KERNELS chooses another set)\n", quant::active_kernels().name);
  fmt::print("- {} run(s) per configuration; prompt of {} characters, {} generated tokens, --ctx {}{}\n", o.runs, o.prompt.size(),
             o.n_predict, o.n_ctx, o.n_threads > 0 ? fmt::format(", --threads {}", o.n_threads) : "");
  const bool probed = o.probe_disk;
  if (probed) {
    fmt::print("- disk: O_DIRECT read rate probed for 2 s before each paged configuration (1 MiB reads at the pager's queue depth); "
               "I/O bound = that rate / MiB read per decode token; Belady bound = that rate / MiB Belady's MIN would read per decode "
               "token on the run's own routing at its arena\n");
  }
  std::string routing = "the model's own routers";
  for (const auto& r : results) {
    if (const runtime::RunReport* rep = r.first_report(); rep && !rep->route_trace.empty()) routing = rep->route_trace;
  }
  fmt::print("- routing: {}\n", routing);
  const bool ppl = !o.perplexity_file.empty();
  fmt::print("\n| budget | policy | top-k | result | arena | slots | coverage | peak RSS | anon | prompt tok/s | decode tok/s (min-max) | "
             "MiB/token | hit % | evictions |{}{}\n",
             probed ? " disk MB/s | I/O bound tok/s | vs bound | MIN MiB/token | Belady bound tok/s | vs Belady |" : "", ppl ? " PPL |" : "");
  fmt::print("|---|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|{}{}\n", probed ? "---:|---:|---:|---:|---:|---:|" : "",
             ppl ? "---:|" : "");
  for (const auto& r : results) {
    const runtime::RunReport* rep = r.first_report();
    const bool paged = rep && rep->paged;
    std::string slots = "-";
    if (paged) {
      slots.clear();
      for (size_t i = 0; i < rep->slots.size(); ++i) slots += (i ? "/" : "") + std::to_string(rep->slots[i]);
    }
    uint64_t evictions = 0;
    for (const auto& run : r.runs) evictions += run.report ? run.report->evictions : 0;
    const double mib = r.decode_mib_per_token();
    std::string bound_cells;
    if (probed) {
      const double rate = r.disk_bytes_per_second;
      const double bound = paged && mib > 0 && rate > 0 ? rate / (mib * (1 << 20)) : NAN;
      const double limit = std::isnan(ram_decode) ? bound : std::isnan(bound) ? ram_decode : std::min(bound, ram_decode);
      const double belady = paged && rate > 0 && r.min_mib_per_token > 0 ? rate / (r.min_mib_per_token * (1 << 20)) : NAN;
      bound_cells = fmt::format(" {} | {} | {} | {} | {} | {} |", rate > 0 ? cell(rate / 1e6, "{:.0f}") : "-", cell(bound),
                                r.passed() && !std::isnan(limit) ? cell(r.median_decode() / limit * 100, "{:.0f}%") : "-",
                                paged ? cell(r.min_mib_per_token, "{:.1f}") : "-", cell(belady),
                                r.passed() && !std::isnan(belady) ? cell(r.median_decode() / belady * 100, "{:.0f}%") : "-");
    }
    fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |{}{}\n", r.config.budget_label,
               r.config.budget_label == "ram" ? "-" : r.config.policy(), rep ? std::to_string(rep->n_expert_used) : "-", r.status(),
               paged ? format_bytes(rep->arena_bytes) : "-", slots, paged ? cell(rep->coverage * 100, "{:.1f}%") : "-",
               r.runs.empty() ? "-" : format_bytes(r.max_peak_rss()), r.passed() ? format_bytes(r.max_anon()) : "-", cell(r.median_prompt()),
               r.passed() ? fmt::format("{} ({}-{})", cell(r.median_decode()), cell(r.min_decode()), cell(r.max_decode())) : "-",
               paged ? cell(mib, "{:.1f}") : "-", paged ? cell(r.decode_hit_rate() * 100, "{:.1f}") : "-", paged ? std::to_string(evictions) : "-",
               bound_cells, ppl ? fmt::format(" {} |", r.perplexity ? cell(*r.perplexity, "{:.4f}") : "-") : "");
  }
}

void write_json(const std::string& path, const BenchArgs& a, const std::vector<runtime::BenchResult>& results) {
  nlohmann::json j;
  j["model"] = a.options.model;
  j["cold"] = a.options.cold;
  j["runs_per_config"] = a.options.runs;
  j["prompt"] = a.options.prompt;
  j["n_predict"] = a.options.n_predict;
  j["n_ctx"] = a.options.n_ctx;
  j["memory_limit"] = memory_limit_mechanism();
  j["kernels"] = quant::active_kernels().name;
  j["route_trace"] = a.options.route_trace;
  j["configs"] = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json c = {{"budget", r.config.budget_label}, {"budget_bytes", r.config.budget}, {"evict", r.config.evict}, {"prefetch", r.config.prefetch},
                        {"expert_used", r.config.expert_used}, {"status", r.status()}, {"runs", nlohmann::json::array()}};
    if (r.perplexity) c["perplexity"] = *r.perplexity;
    if (r.disk_bytes_per_second > 0) c["disk_bytes_per_second"] = r.disk_bytes_per_second;
    if (!std::isnan(r.min_mib_per_token)) c["belady_mib_per_decode_token"] = r.min_mib_per_token;
    for (const auto& run : r.runs) {
      nlohmann::json x = {{"exit_code", run.process.exit_code}, {"signal", run.process.signal},
                          {"killed_by_limit", run.process.killed_by_limit}, {"peak_rss", run.process.peak_rss},
                          {"cgroup_peak", run.process.cgroup_peak}, {"mechanism", run.process.mechanism}};
      if (run.report) x["report"] = run.report->to_json();
      else x["failure"] = run.failure;
      c["runs"].push_back(x);
    }
    j["configs"].push_back(c);
  }
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) fail("cannot write {}", path);
}

void write_svg(const std::string& path, const BenchArgs& a, const std::vector<runtime::BenchResult>& results) {
  std::vector<std::string> budgets;
  for (const std::string& b : a.options.budgets) budgets.push_back(b);
  ChartPanel speed{"decode tok/s (median)", true, {}}, hits{"expert hit % (decode)", false, {}};
  for (const auto& r : results) {
    const std::string name = r.config.series();
    auto find = [&](ChartPanel& p) -> ChartSeries& {
      for (ChartSeries& s : p.series) {
        if (s.name == name) return s;
      }
      p.series.push_back({name, std::vector<double>(budgets.size(), NAN)});
      return p.series.back();
    };
    const size_t x = static_cast<size_t>(std::find(budgets.begin(), budgets.end(), r.config.budget_label) - budgets.begin());
    find(speed).values[x] = r.passed() ? r.median_decode() : NAN;
    if (r.config.budget_label != "ram") find(hits).values[x] = r.passed() ? r.decode_hit_rate() * 100 : NAN;
  }
  std::ofstream out(path);
  out << render_line_chart("epq bench: " + a.options.model, "RAM budget", budgets, {speed, hits});
  if (!out) fail("cannot write {}", path);
}

void run(BenchArgs& a) {
  quant::active_kernels();  // an unusable EPQ_KERNELS fails here, not in every child
  if (a.options.prompt.empty()) a.options.prompt = kDefaultPrompt;
  std::string reason;
  if (a.options.probe_disk && !pager::direct_io_works(a.options.model, &reason)) a.options.probe_disk = false;
  ProgressLine progress(!a.quiet);
  const auto results = runtime::run_bench(a.options, [&](const std::string& text) {
    progress.update("bench: " + text + fmt::format("  ({:.0f} s)", progress.elapsed_seconds()), true);
  });
  progress.finish();
  print_table(a, results);
  if (!a.json_path.empty()) write_json(a.json_path, a, results);
  if (!a.svg_path.empty()) write_svg(a.svg_path, a, results);
  const auto passed = std::count_if(results.begin(), results.end(), [](const runtime::BenchResult& r) { return r.passed(); });
  if (passed == 0) fail("bench: all {} configurations failed (see the result column)", results.size());
}

}  // namespace

void add_bench_command(CLI::App& root) {
  auto args = std::make_shared<BenchArgs>();
  runtime::BenchOptions& o = args->options;
  CLI::App* c = root.add_subcommand("bench", "Sweep RAM budgets (and policies, top-k) under kernel-enforced memory limits");
  c->add_option("-m,--model", o.model, "GGUF model file")->required();
  c->add_option("--budgets", o.budgets, "Budgets: sizes, 'all' (every expert fits) or 'ram' (all-in-RAM path, no paging)")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--runs", o.runs, "Runs per configuration (the table shows the median)")->check(CLI::Range(1, 1000))->capture_default_str();
  c->add_option("-p,--prompt", o.prompt, "Prompt (default: a short English paragraph)");
  c->add_option("-n,--n-predict", o.n_predict, "Tokens to generate per run")->check(CLI::Range(0, runtime::kMaxGeneratedTokens))->capture_default_str();
  c->add_option("-c,--ctx", o.n_ctx, "Context length")->check(CLI::Range(1, runtime::kMaxContext))->capture_default_str();
  c->add_option("-t,--threads", o.n_threads, "Compute threads (default: physical cores)")->check(CLI::Range(1, runtime::kMaxThreads));
  c->add_option("--evict", o.evict, "Eviction policies to compare: lrfu, lru, ls, ls-pos")
      ->delimiter(',')
      ->check(CLI::IsMember(pager::eviction_policy_names()))
      ->capture_default_str();
  c->add_option("--prefetch", o.prefetch,
                "Pager prefetch modes to compare in paged runs: gate, history, off (e.g. off,gate; default: gate, or off with "
                "--route-trace)")
      ->delimiter(',')
      ->check(CLI::IsMember(pager::prefetch_names()));
  c->add_option("--route-trace", o.route_trace,
                "Replay this routing trace (epq run --trace-routing) in every run in place of the model's routers, mapped onto its "
                "layers and experts (docs/CACHING.md): disk and cache then behave as with that routing")
      ->check(CLI::ExistingFile);
  c->add_option("--expert-used", o.expert_used, "Top-k values to compare (0: the model's own)")->delimiter(',');
  c->add_flag("--cold", o.cold, "Drop the model's page cache before every run (all caches when root)");
  c->add_option("--perplexity", o.perplexity_file, "Also measure PPL on this text file for each configuration");
  c->add_option("--json", args->json_path, "Write every raw run as JSON");
  c->add_option("--svg", args->svg_path, "Write a chart of decode tok/s and hit % against budget");
  c->add_flag("!--no-probe", o.probe_disk, "Skip the disk probes (and the I/O bound columns)");
  c->add_option("--child-args", o.extra_args, "Extra arguments for every child run (e.g. \"--io pread\")")->delimiter(' ');
  c->add_flag("-q,--quiet", args->quiet, "No progress output");
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
