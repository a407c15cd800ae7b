// `epq replay`: a routing trace through the pager's eviction policies at several arena
// sizes, next to Belady's MIN, with a Markdown table, raw JSON and an SVG chart.
#include <fmt/core.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "gguf/file.h"
#include "models/model.h"
#include "pager/eviction_policy.h"
#include "runtime/replay.h"
#include "util/error.h"
#include "util/svg_chart.h"

namespace epq::app {
namespace {

struct ReplayArgs {
  std::string trace;
  std::vector<int64_t> slots;
  std::vector<std::string> policies = pager::eviction_policy_names();
  std::string model;
  std::string json_path;
  std::string svg_path;
  bool prefetch = false;
};

constexpr const char* kWithPrefetch = " + prefetch";

struct Row {
  int64_t total;
  std::vector<int64_t> slots;                // per size class
  std::vector<pager::PagerStats> by_policy;  // the policies, then MIN
};

double hit_percent(const pager::PagerStats& s) { return s.requests ? 100.0 * static_cast<double>(s.hits) / static_cast<double>(s.requests) : 0.0; }
double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::string split(const std::vector<int64_t>& slots) {
  std::string s;
  for (size_t i = 0; i < slots.size(); ++i) s += (i ? "/" : "") + std::to_string(slots[i]);
  return s;
}

void run(ReplayArgs& a) {
  const runtime::RoutingTrace trace = runtime::read_routing_trace(a.trace);
  const runtime::TraceHeader& h = trace.header;
  if (!a.model.empty()) {
    gguf::File file = gguf::File::open(a.model, gguf::File::Access::kHeaderOnly);
    const std::string why = h.mismatch(runtime::TraceHeader::of_model(a.model, models::read_model_info(file, {h.k})));
    if (!why.empty()) fail("{} does not fit {}: it was {}", a.trace, a.model, why);
  }
  const pager::SizeClasses classes = runtime::trace_size_classes(h);
  int64_t tokens = 0, all = 0;
  for (const auto& p : trace.passes) tokens += p.n_tokens;
  for (const auto& c : classes.classes) all += static_cast<int64_t>(c.total_experts());
  // Columns: each policy, with --prefetch each policy with prefetch as well, then MIN.
  std::vector<std::string> names = a.policies;
  if (a.prefetch) {
    for (const std::string& p : a.policies) names.push_back(p + kWithPrefetch);
  }
  names.push_back(runtime::kBeladyName);

  std::vector<Row> rows;
  for (int64_t total : a.slots) {
    Row r{total, runtime::slots_for_total(classes, h.k, total), {}};
    for (const std::string& name : names) {
      const bool prefetch = name.ends_with(kWithPrefetch);
      const std::string base = prefetch ? name.substr(0, name.size() - std::strlen(kWithPrefetch)) : name;
      auto policy = base == runtime::kBeladyName ? runtime::make_belady_policy(trace) : pager::make_eviction_policy(base);
      r.by_policy.push_back(runtime::replay_trace(trace, classes, r.slots, std::move(policy), nullptr, prefetch));
    }
    rows.push_back(std::move(r));
  }

  fmt::print("## epq replay: {}\n\n", a.trace);
  fmt::print("- model: {} ({}, {} layers, {} experts, top-{}, {} size class{})\n", h.model, h.architecture, h.n_layer, h.n_expert, h.k,
             classes.classes.size(), classes.classes.size() == 1 ? "" : "es");
  fmt::print("- trace: {} forward passes, {} tokens, {} expert requests\n", trace.passes.size(), tokens,
             rows.empty() ? 0 : rows[0].by_policy[0].requests);
  const runtime::PredictorAccuracy predictor = runtime::measure_predictor(trace);
  fmt::print("- prefetch predictor (--prefetch): named {:.1f}% of the next routed layer's experts ({} of {}); {:.1f}% of its {} "
             "predictions were asked for\n",
             100 * predictor.recall(), predictor.named, predictor.requested, 100 * predictor.precision(), predictor.predicted);
  fmt::print("- cells: hit % / MiB read; {} is Belady's MIN under the pager's rules (an upper bound on hits)\n\n", runtime::kBeladyName);
  fmt::print("| slots | per class | coverage |");
  for (const std::string& n : names) fmt::print(" {} |", n);
  fmt::print("\n|---:|---|---:|");
  for (size_t i = 0; i < names.size(); ++i) fmt::print("---:|");
  fmt::print("\n");
  for (const Row& r : rows) {
    fmt::print("| {} | {} | {:.1f}% |", r.total, split(r.slots), 100.0 * static_cast<double>(r.total) / static_cast<double>(all));
    for (const auto& s : r.by_policy) fmt::print(" {:.1f} / {:.0f} |", hit_percent(s), mib(s.bytes_read));
    fmt::print("\n");
  }

  if (!a.json_path.empty()) {
    nlohmann::json j = {{"trace", a.trace}, {"model", h.model}, {"architecture", h.architecture}, {"n_layer", h.n_layer},
                        {"n_expert", h.n_expert}, {"n_expert_used", h.k}, {"passes", trace.passes.size()}, {"tokens", tokens},
                        {"experts", all}, {"rows", nlohmann::json::array()},
                        {"predictor", {{"predicted", predictor.predicted}, {"requested", predictor.requested}, {"named", predictor.named}}}};
    for (const Row& r : rows) {
      nlohmann::json row = {{"slots", r.total}, {"slots_per_class", r.slots}, {"policies", nlohmann::json::object()}};
      for (size_t i = 0; i < names.size(); ++i) {
        const pager::PagerStats& s = r.by_policy[i];
        row["policies"][names[i]] = {{"requests", s.requests}, {"hits", s.hits}, {"misses", s.misses}, {"hit_percent", hit_percent(s)},
                                     {"evictions", s.evictions()}, {"bytes_read", s.bytes_read}, {"prefetched", s.prefetched},
                                     {"prefetch_used", s.prefetch_used},
                                     {"mib_per_token", tokens ? mib(s.bytes_read) / static_cast<double>(tokens) : 0.0}};
      }
      j["rows"].push_back(row);
    }
    std::ofstream out(a.json_path);
    out << j.dump(2) << "\n";
    if (!out) fail("cannot write {}", a.json_path);
  }
  if (!a.svg_path.empty()) {
    std::vector<std::string> x;
    for (const Row& r : rows) x.push_back(std::to_string(r.total));
    ChartPanel hits{"expert hit %", false, {}}, read{"MiB read per token", false, {}};
    for (size_t i = 0; i < names.size(); ++i) {
      ChartSeries hs{names[i], {}}, rs{names[i], {}};
      for (const Row& r : rows) {
        hs.values.push_back(hit_percent(r.by_policy[i]));
        rs.values.push_back(tokens ? mib(r.by_policy[i].bytes_read) / static_cast<double>(tokens) : NAN);
      }
      hits.series.push_back(hs);
      read.series.push_back(rs);
    }
    std::ofstream out(a.svg_path);
    out << render_line_chart("epq replay: " + h.model, "arena slots", x, {hits, read});
    if (!out) fail("cannot write {}", a.svg_path);
  }
}

}  // namespace

void add_replay_command(CLI::App& root) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* c = root.add_subcommand("replay", "Replay a routing trace through the eviction policies and Belady's MIN at several arena sizes");
  c->add_option("trace", args->trace, "Routing trace written by --trace-routing")->required();
  c->add_option("--slots", args->slots, "Arena sizes in expert slots, all size classes together, divided as the memory plan divides an arena")
      ->delimiter(',')
      ->required()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32));
  c->add_option("--policy", args->policies, "Eviction policies to replay (Belady's MIN is always shown)")
      ->delimiter(',')
      ->check(CLI::IsMember(pager::eviction_policy_names()))
      ->capture_default_str();
  c->add_option("-m,--model", args->model, "Check that the trace was recorded on this GGUF model");
  c->add_option("--json", args->json_path, "Write every result as JSON");
  c->add_option("--svg", args->svg_path, "Write a chart of hit % and MiB read per token against arena slots");
  c->add_flag("--prefetch", args->prefetch,
              "Also replay each policy with the pager's prefetch, as if every prefetch landed in time (hits and bytes read, "
              "prefetches included)");
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
