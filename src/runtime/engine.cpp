#include "runtime/engine.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>

#include "models/resident_experts.h"
#include "quant/dot.h"
#include "runtime/resident_loader.h"
#include "runtime/route_replay.h"
#include "runtime/routing_recorder.h"
#include "util/error.h"
#include "util/format.h"
#include "util/memory_limit.h"

namespace epq::runtime {

uint64_t parse_budget(const std::string& text, const std::string& what) {
  const std::optional<uint64_t> bytes = parse_size(text);
  if (!bytes || *bytes == 0) fail("{}: expected a size such as 8G or 512M, got '{}'", what, printable(text));
  if (*bytes > kMaxBudget) fail("{}: {} is larger than the limit of {}", what, printable(text), format_bytes(kMaxBudget));
  return *bytes;
}

std::optional<uint64_t> budget_from_environment() {
  const char* mb = std::getenv("EPQ_RAM_BUDGET_MB");
  if (mb == nullptr || *mb == '\0') return std::nullopt;
  const std::string text = mb;
  if (text.find_first_not_of("0123456789") != std::string::npos || text.size() > 12) {
    fail("EPQ_RAM_BUDGET_MB must be a positive whole number of MiB, got '{}'", printable(text));
  }
  return parse_budget(text + "M", "EPQ_RAM_BUDGET_MB");
}

EngineOptions resolve(EngineOptions o) {
  if (o.n_ctx < 1 || o.n_ctx > kMaxContext) fail("--ctx must be between 1 and {}, got {}", kMaxContext, o.n_ctx);
  if (o.n_batch < 1) fail("--batch must be at least 1, got {}", o.n_batch);
  o.n_batch = std::min(o.n_batch, o.n_ctx);
  const int cpus = usable_cpu_count();
  if (o.n_threads > cpus) fail("--threads {} is more than the {} CPUs this process may run on", o.n_threads, cpus);
  if (o.n_threads <= 0) o.n_threads = physical_core_count();
  if (!o.ram_budget) o.ram_budget = budget_from_environment();
  if (o.mmap && o.ram_budget) fail("--mmap is for runs all in RAM: with a budget (--ram-budget or EPQ_RAM_BUDGET_MB) experts are paged from the file");
  if (!o.prefetch) o.prefetch = o.route_trace.empty() ? pager::Prefetch::kStaleGate : pager::Prefetch::kOff;
  quant::active_kernels();  // an unusable EPQ_KERNELS fails before the model loads (serve: before it listens)
  return o;
}

Engine::Engine(const EngineOptions& options)
    : options_(resolve(options)),
      file_(gguf::File::open(options_.model_path, options_.mmap ? gguf::File::Access::kAll : gguf::File::Access::kHeaderOnly)) {
  tokenizer_.emplace(text::Tokenizer::from_gguf(file_));
  const models::ModelOptions model_options{options_.expert_used, options_.chunked_delta_rule};
  auto note = [&](const std::string& text) {
    if (!options_.quiet) fmt::print(stderr, "epq: {}\n", text);
  };

  // Read before the memory plan, which measures the process as it stands.
  auto load_route_trace = [&](const models::ModelInfo& info) {
    if (options_.route_trace.empty()) return;
    if (*options_.prefetch == pager::Prefetch::kStaleGate) {
      fail("--prefetch gate predicts from the model's own routers, which --route-trace replaces: use --prefetch history");
    }
    replayer_ = std::make_unique<RouteReplayer>(options_.route_trace, info);
    note(replayer_->description());
  };
  if (!options_.ram_budget) {
    // The weights are read into the process's memory, in 2 MiB pages and the kernels'
    // layout, where they fit with a tenth of the memory available to spare (for the KV
    // cache, scratch and the rest of the system); else, or with --mmap, used from the file's
    // mapping in the page cache (4 KiB pages for much of it).
    const int n_layer = models::read_model_info(file_, model_options).n_layer;
    const uint64_t needed = resident_bytes(file_, n_layer, true), available = available_memory();
    const bool read_in = !options_.mmap && needed <= available / 10 * 9;
    if (read_in) {
      file_.unmap();  // from here on, weights come only through direct reads
      source_ = std::make_unique<pager::ShardFiles>(file_.shard_paths(), options_.io.force_buffered);
      resident_ = std::make_unique<ResidentLoader>(file_, *source_, n_layer, true, !options_.quiet);
      if (resident_->seconds() >= 1) {  // small models load silently
        note(fmt::format("all in RAM: weights read into memory ({}, {} of it rearranged into row groups for the kernels) in {:.1f} s",
                         format_bytes(resident_->bytes()), format_bytes(resident_->rows4_bytes()), resident_->seconds()));
      }
    } else if (!options_.mmap) {
      note(fmt::format("all in RAM: the model's weights ({}) do not fit in the memory available ({}) with a tenth to spare, so they are "
                       "read from the file's mapping, in the page cache; --ram-budget pages the experts instead",
                       format_bytes(needed), format_bytes(available)));
      file_ = gguf::File::open(options_.model_path, gguf::File::Access::kAll);  // it was opened for the header only
    }
    const models::ResidentWeights mapped = read_in ? models::ResidentWeights() : models::ResidentWeights::from_mapping(file_);
    const models::ResidentWeights& weights = read_in ? resident_->weights() : mapped;
    model_ = models::load_model(file_, weights, model_options);
    resident_experts_ = std::make_unique<models::ResidentExperts>(file_, model_->info().experts, weights);
    load_route_trace(model_->info());
  } else {
    const models::ModelInfo info = models::read_model_info(file_, model_options);
    file_.unmap();  // from here on, weights come only through direct reads
    load_route_trace(info);
    plan_ = plan_memory_now(file_, info, model_options, {*options_.ram_budget, options_.n_ctx, options_.n_batch, options_.n_threads, options_.io, 0,
                                                         options_.reserved_bytes, options_.all_logits,
                                                         *options_.prefetch == pager::Prefetch::kHistory, options_.n_sequences});
    if (!plan_->feasible) fail("{}", plan_->refusal());
    source_ = std::make_unique<pager::ShardFiles>(file_.shard_paths(), options_.io.force_buffered);
    resident_ = std::make_unique<ResidentLoader>(file_, *source_, info.n_layer, false, !options_.quiet);
    model_ = models::load_model(file_, resident_->weights(), model_options);
    pager::PagerOptions po{plan_->slots, options_.evict, options_.io, *options_.prefetch};
    pager_ = std::make_unique<pager::Pager>(file_.shard_paths(), model_->info().experts, po);
    for (const std::string& n : pager_->notes()) note(n);
    note(fmt::format("paging experts: budget {}, arena {} ({:.1f}% of experts), {} eviction{}, {}", format_bytes(*options_.ram_budget),
                     format_bytes(pager_->arena_bytes()), 100 * plan_->coverage(), pager_->policy().name(),
                     *options_.prefetch == pager::Prefetch::kOff ? "" : " with prefetch (" + prefetch_name() + ")", pager_->io_name()));
  }
  if (tokenizer_->n_vocab() != model_->info().n_vocab) {
    fail("{}: tokenizer has {} tokens but the model's vocabulary is {}", file_.path(), tokenizer_->n_vocab(), model_->info().n_vocab);
  }
  pool_ = std::make_unique<ThreadPool>(options_.n_threads);
  if (!options_.stats_file.empty()) pass_log_ = std::make_unique<PassLog>(options_.stats_file);
  if (!options_.trace_routing.empty()) {
    recorder_ = std::make_unique<RoutingRecorder>(options_.trace_routing, TraceHeader::of_model(options_.model_path, model_->info()));
  }
  batched_ = std::make_unique<BatchedPasses>(BatchedPasses::StepHooks{
      [this](int64_t n_tokens, int32_t pos0) -> models::ExpertSource& { return open_pass(n_tokens, pos0); },
      [this](int64_t n_tokens) { close_pass(n_tokens); }}, options_.n_sequences > 1 ? BatchedPasses::shared_products_bytes(model_->info()) : 0, options_.n_batch);
}

Engine::~Engine() = default;

std::string Engine::pager_summary(int64_t tokens) const {
  if (!pager_) return {};
  const pager::PagerStats& s = pager_->stats();
  const std::string prefetch =
      *options_.prefetch == pager::Prefetch::kOff
          ? ""
          : fmt::format(", {} experts prefetched ({} used; the predictor named {} experts, {:.1f}% of them asked for)", s.prefetched,
                        s.prefetch_used, s.predicted, s.predicted ? 100.0 * static_cast<double>(s.predicted_right) / static_cast<double>(s.predicted) : 0.0);
  return fmt::format("pager: {:.1f}% hits ({} of {} expert requests), {:.1f} MiB read per token, {} evictions{}, io wait {:.1f} ms; "
                     "arena {} holds {:.1f}% of experts",
                     s.requests ? 100.0 * static_cast<double>(s.hits) / static_cast<double>(s.requests) : 0.0, s.hits, s.requests,
                     tokens ? static_cast<double>(s.bytes_read) / static_cast<double>(tokens) / (1 << 20) : 0.0, s.evictions(), prefetch,
                     s.io_wait_ms, format_bytes(pager_->arena_bytes()), 100 * plan_->coverage());
}

std::string Engine::prefetch_name() const { return pager::prefetch_names()[static_cast<size_t>(*options_.prefetch)]; }

std::string Engine::route_replay() const { return replayer_ ? replayer_->description() : std::string(); }

std::unique_ptr<models::ForwardState> Engine::new_state() const {
  return model_->new_state(options_.n_ctx, options_.n_batch, options_.n_threads);
}

models::ExpertSource& Engine::open_pass(int64_t n_tokens, int32_t pos0) {
  models::ExpertSource* experts = pager_ ? static_cast<models::ExpertSource*>(pager_.get()) : resident_experts_.get();
  if (replayer_) {
    replayer_->start_pass(*experts, n_tokens);
    experts = replayer_.get();
  }
  if (recorder_) {
    recorder_->start_pass(*experts, n_tokens, pos0);
    experts = recorder_.get();
  }
  pass_before_ = pager_ ? pager_->stats() : pager::PagerStats{};
  pass_start_ = std::chrono::steady_clock::now();
  return *experts;
}

void Engine::close_pass(int64_t n_tokens) {
  if (!pass_log_) return;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - pass_start_).count();
  pass_log_->record(n_tokens, pager_ ? pager_->stats() - pass_before_ : pager::PagerStats{}, ms);
}

void Engine::forward(models::ForwardState& state, std::span<const int32_t> tokens, int32_t pos0, bool all_logits, float* logits,
                     models::ForwardTiming* timing) {
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (BatchedPasses::joined()) {
    batched_->run(n_tokens, pos0, [&](models::ExpertSource& experts) {
      model_->forward(state, experts, *pool_, tokens, pos0, all_logits, logits, timing);
    });
    return;
  }
  model_->forward(state, open_pass(n_tokens, pos0), *pool_, tokens, pos0, all_logits, logits, timing);
  close_pass(n_tokens);
}

}  // namespace epq::runtime
