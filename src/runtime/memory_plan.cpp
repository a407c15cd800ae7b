#include "runtime/memory_plan.h"

#include <algorithm>

#include "core/thread_pool.h"
#include "pager/next_layer_predictor.h"
#include "runtime/batched_passes.h"
#include "runtime/resident_loader.h"
#include "runtime/session.h"
#include "util/error.h"
#include "util/format.h"
#include "util/process_memory.h"

namespace epq::runtime {

double MemoryPlan::coverage() const {
  uint64_t held = 0;
  for (size_t c = 0; c < classes.classes.size(); ++c) held += static_cast<uint64_t>(slots[c]) * classes.classes[c].slot_bytes;
  return expert_bytes_total ? static_cast<double>(held) / static_cast<double>(expert_bytes_total) : 1.0;
}

std::string MemoryPlan::refusal() const {
  return fmt::format("--ram-budget {} ({} bytes) is below the minimum of {} ({} bytes) for this model and settings ({} for the rest of "
                     "the process plus {} expert slots per layer); raise the budget, or lower --ctx/--batch/--threads (serve: --parallel)",
                     format_bytes(budget), budget, format_bytes(minimum_budget), minimum_budget, format_bytes(fixed_bytes), n_expert_used);
}

std::vector<int64_t> divide_arena(const pager::SizeClasses& classes, int n_expert_used, uint64_t arena) {
  // Top-k slots per class first; the rest of the arena in proportion to expert bytes.
  const size_t n_classes = classes.classes.size();
  const uint64_t k = static_cast<uint64_t>(n_expert_used);
  uint64_t used = 0, expert_bytes_total = 0;
  std::vector<int64_t> slots(n_classes);
  for (size_t c = 0; c < n_classes; ++c) {
    const auto& cls = classes.classes[c];
    slots[c] = static_cast<int64_t>(std::min<uint64_t>(k, cls.total_experts()));
    used += static_cast<uint64_t>(slots[c]) * cls.slot_bytes;
    expert_bytes_total += cls.total_experts() * cls.slot_bytes;
  }
  const uint64_t spare = arena > used ? arena - used : 0;
  for (size_t c = 0; c < n_classes; ++c) {
    const auto& cls = classes.classes[c];
    const double share = static_cast<double>(cls.total_experts() * cls.slot_bytes) / static_cast<double>(expert_bytes_total);
    const uint64_t extra = static_cast<uint64_t>(static_cast<double>(spare) * share) / cls.slot_bytes;
    slots[c] = static_cast<int64_t>(std::min<uint64_t>(cls.total_experts(), static_cast<uint64_t>(slots[c]) + extra));
  }
  return slots;
}

MemoryPlan plan_memory(const gguf::File& file, const models::ModelInfo& info, const models::ModelOptions& model_options,
                       const PlanInput& in) {
  MemoryPlan p;
  p.budget = in.budget;
  p.n_expert_used = info.n_expert_used;
  p.classes = pager::size_classes(info.experts);
  const size_t n_classes = p.classes.classes.size();
  if (n_classes == 0) fail("{}: the model has no routed experts to page", file.path());

  if (in.n_sequences < 1) fail("internal: a plan for {} sequences", in.n_sequences);
  const auto n_seq = static_cast<uint64_t>(in.n_sequences);
  auto sequences = [&](const char* what) { return n_seq == 1 ? std::string(what) : fmt::format("{} ({} sequences)", what, n_seq); };
  const uint64_t max_slots = [&] { uint64_t n = 0; for (const auto& c : p.classes.classes) n += c.total_experts(); return n; }();
  p.lines = {
      {"process (code, libraries, metadata, tokenizer)", (in.process_bytes + (1 << 20) - 1) / (1 << 20) * (1 << 20) + kProcessMargin},
      {"resident weights", resident_bytes(file, info.n_layer)},
      {sequences("KV cache and compute scratch"), n_seq * models::forward_state_bytes(file, model_options, in.n_ctx, in.n_batch, in.n_threads)},
      {sequences("logits"), n_seq * Session::logits_bytes(info.n_vocab, in.all_logits ? in.n_batch : 0)},
      {"thread stacks", static_cast<uint64_t>(std::max(0, in.n_threads - 1)) * ThreadPool::kWorkerStackBytes},
      {"I/O engine", pager::IoEngine::memory_bytes(in.io)},
      {"pager tables", max_slots * 128 + info.experts.size() * static_cast<uint64_t>(info.n_expert) * 4},
      {"heap headroom", kHeapHeadroom},
  };
  if (in.prefetch_history) p.lines.push_back({"prefetch predictor", pager::NextLayerPredictor::memory_bytes(p.classes)});
  if (info.recurrent_bytes > 0) p.lines.push_back({sequences("recurrent-state snapshots"), n_seq * Session::snapshot_bytes(info)});
  if (n_seq > 1) p.lines.push_back({"products shared across sequences", BatchedPasses::shared_products_bytes(info)});
  if (in.reserved_bytes > 0) p.lines.push_back({"server threads and request buffers", in.reserved_bytes});
  // A memory cgroup also charges the page tables that map all of this: 8 bytes per 4 KiB
  // page, 1/512 of the budget (upper table levels and slack: 1 MiB).
  uint64_t base = 0;
  for (const LedgerLine& l : p.lines) base += l.bytes;
  auto page_tables = [](uint64_t budget) { return budget / 512 + (1 << 20); };
  // The smallest budget b with b - page_tables(b) >= need: b - floor(b/512) never
  // decreases as b grows, so start a page-table block below 512/511 (need + 1 MiB) and
  // step up.
  auto budget_for = [&](uint64_t need) -> uint64_t {
    if (need > (uint64_t{1} << 60)) return UINT64_MAX;  // no machine has it: the plan refuses
    const uint64_t start = (need + (1 << 20)) / 511 * 512;
    uint64_t b = start > 1024 ? start - 1024 : 0;
    while (b < page_tables(b) || b - page_tables(b) < need) ++b;
    return b;
  };
  p.lines.push_back({"kernel page tables", page_tables(in.budget)});
  p.fixed_bytes = base + page_tables(in.budget);

  const uint64_t k = static_cast<uint64_t>(info.n_expert_used);
  uint64_t minimum_arena = 0;
  for (const auto& c : p.classes.classes) {
    minimum_arena += std::min<uint64_t>(k, c.total_experts()) * c.slot_bytes;
    p.expert_bytes_total += c.total_experts() * c.slot_bytes;
  }
  p.minimum_budget = budget_for(base + minimum_arena);
  p.all_fit_budget = budget_for(base + p.expert_bytes_total);
  p.slots.assign(n_classes, 0);
  p.feasible = in.budget >= p.fixed_bytes + minimum_arena;
  if (!p.feasible) return p;

  p.slots = divide_arena(p.classes, p.n_expert_used, in.budget - p.fixed_bytes);
  for (size_t c = 0; c < n_classes; ++c) p.arena_bytes += static_cast<uint64_t>(p.slots[c]) * p.classes.classes[c].slot_bytes;
  return p;
}

MemoryPlan plan_memory_now(const gguf::File& file, const models::ModelInfo& info, const models::ModelOptions& model_options,
                           PlanInput input) {
  // RSS now, not the peak so far: the header's pages were mapped while it was parsed, and
  // how many depends on the page cache (the kernel maps up to 16 cached pages around each
  // fault, one page when it must read). That peak moved the plan by 2 MiB from one run of
  // the same file to the next; the pages are gone now, and they were mapped before any
  // buffer the plan counts existed.
  input.process_bytes = read_process_memory().rss;
  return plan_memory(file, info, model_options, input);
}

}  // namespace epq::runtime
