// `epq plan`: where a RAM budget goes, before running anything.
#include <fmt/core.h>

#include "app/commands.h"
#include "app/engine_flags.h"
#include "gguf/file.h"
#include "runtime/memory_plan.h"
#include "text/tokenizer.h"
#include "util/error.h"
#include "util/format.h"

namespace epq::app {
namespace {

void run(const runtime::EngineOptions& options) {
  const runtime::EngineOptions o = runtime::resolve(options);
  if (!o.ram_budget) fail("give a budget with --ram-budget SIZE (or EPQ_RAM_BUDGET_MB)");
  // Load what a run loads before planning, so the measured process size is the same.
  gguf::File file = gguf::File::open(o.model_path, gguf::File::Access::kHeaderOnly);
  const text::Tokenizer tokenizer = text::Tokenizer::from_gguf(file);
  const models::ModelOptions model_options{o.expert_used, o.chunked_delta_rule};
  const models::ModelInfo info = models::read_model_info(file, model_options);
  file.unmap();
  const runtime::MemoryPlan p = runtime::plan_memory_now(file, info, model_options, {*o.ram_budget, o.n_ctx, o.n_batch, o.n_threads, o.io, 0, 0, false, o.prefetch == pager::Prefetch::kHistory, o.n_sequences});

  fmt::print("Memory plan for {} ({}), --ram-budget {}, --ctx {}, --batch {}, --threads {}, --parallel {}\n\n", o.model_path, info.name,
             format_bytes(p.budget), o.n_ctx, o.n_batch, o.n_threads, o.n_sequences);
  fmt::print("Model files ({} shard{})\n", file.shards().size(), file.shards().size() == 1 ? "" : "s");
  for (const gguf::Shard& s : file.shards()) fmt::print("  {:<50} {:>12} {:>8} tensors\n", s.path, format_bytes(s.file_size), s.n_tensors);
  fmt::print("\n");
  for (const runtime::LedgerLine& l : p.lines) fmt::print("  {:<50} {:>12}\n", l.name, format_bytes(l.bytes));
  fmt::print("  {:<50} {:>12}\n", "subtotal (everything but the expert arena)", format_bytes(p.fixed_bytes));
  if (p.feasible) {
    fmt::print("  {:<50} {:>12}\n", "expert arena", format_bytes(p.arena_bytes));
    fmt::print("  {:<50} {:>12}\n", "unused (less than a slot)", format_bytes(p.budget - p.fixed_bytes - p.arena_bytes));
  }
  fmt::print("\nSlot size classes\n  {:<8} {:>12} {:>8} {:>10} {:>10}  layers\n", "class", "slot", "slots", "experts", "coverage");
  for (size_t c = 0; c < p.classes.classes.size(); ++c) {
    const pager::SizeClass& k = p.classes.classes[c];
    const std::string layers = k.layers.size() == 1 ? fmt::format("{}", k.layers[0])
                                                    : fmt::format("{} layers ({}..{})", k.layers.size(), k.layers.front(), k.layers.back());
    fmt::print("  {:<8} {:>12} {:>8} {:>10} {:>9.1f}%  {}\n", c, format_bytes(k.slot_bytes), p.slots[c], k.total_experts(),
               100.0 * static_cast<double>(p.slots[c]) / static_cast<double>(k.total_experts()), layers);
  }
  fmt::print("\nexpert coverage: {:.1f}% of {} of experts\n", 100 * p.coverage(), format_bytes(p.expert_bytes_total));
  fmt::print("minimum budget: {} ({} bytes; {} experts per layer in memory)\n", format_bytes(p.minimum_budget), p.minimum_budget,
             p.n_expert_used);
  fmt::print("budget that holds every expert: {} ({} bytes)\n", format_bytes(p.all_fit_budget), p.all_fit_budget);
  if (!p.feasible) fail("{}", p.refusal());
}

}  // namespace

void add_plan_command(CLI::App& root) {
  auto options = std::make_shared<runtime::EngineOptions>();
  CLI::App* c = root.add_subcommand("plan", "Show how a RAM budget would be spent: the ledger, the expert arena and its slots");
  add_engine_flags(c, *options);
  c->add_option("--parallel", options->n_sequences, "Plan for N sequences decoding together, each with its own KV cache (serve --parallel N)")
      ->check(CLI::Range(1, runtime::kMaxParallel))
      ->capture_default_str();
  c->callback([options] { run(*options); });
}

}  // namespace epq::app
