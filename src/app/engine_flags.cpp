#include "app/engine_flags.h"

#include "app/validators.h"
#include "util/format.h"

namespace epq::app {

void add_engine_flags(CLI::App* c, runtime::EngineOptions& o) {
  c->add_option("-m,--model", o.model_path, "GGUF model file (of a split model: its first shard, ...-00001-of-0000N.gguf)")->required();
  c->add_option("-c,--ctx", o.n_ctx, "Context length in tokens")->check(CLI::Range(1, runtime::kMaxContext))->capture_default_str();
  c->add_option("-t,--threads", o.n_threads, "Compute threads, at most the CPUs this process may use (default: physical cores)")
      ->check(CLI::Range(1, runtime::kMaxThreads));
  c->add_option("-b,--batch", o.n_batch, "Prompt tokens per forward pass (at most --ctx); with serve --parallel, also the most prompt tokens one batched step takes on")->check(CLI::Range(1, runtime::kMaxContext))->capture_default_str();
  c->add_option("--expert-used", o.expert_used, "Override the model's experts per token (top-k), for ablations")
      ->envname("EPQ_EXPERT_USED");
  c->add_option_function<std::string>(
       "--delta-rule",
       [&o](const std::string& v) { o.chunked_delta_rule = v == "chunked"; },
       "Gated DeltaNet layers (qwen35moe): prompts token by token (recurrent, the default: a reused prefix gives the same bits "
       "as a fresh run) or in chunks of 64 (chunked, the WY form; equal within float rounding)")
      ->check(CLI::IsMember({"recurrent", "chunked"}));
  c->add_option_function<std::string>(
       "--ram-budget",
       [&o](const std::string& v) {
         o.ram_budget = runtime::parse_budget(v, "--ram-budget");
       },
       "Bound the whole process's memory (e.g. 8G): routed experts are paged from the file (or EPQ_RAM_BUDGET_MB)");
  c->add_flag("--mmap", o.mmap,
              "All in RAM: read the weights from the file's mapping in the page cache, as they are, instead of copying them into "
              "the process's memory in 2 MiB pages and the kernels' layout (starts sooner from a warm page cache, and decodes slower)");
  c->add_option("--evict", o.evict, "Expert eviction policy: lrfu (recency and frequency), lru, ls (Least-Stale) or ls-pos (position-aware)")
      ->envname("EPQ_EVICT")
      ->check(CLI::IsMember(pager::eviction_policy_names()))
      ->capture_default_str();
  c->add_option("--io", o.io.backend, "Expert reads: uring (io_uring) or pread (a thread pool)")
      ->check(CLI::IsMember({"uring", "pread"}))
      ->capture_default_str();
  c->add_option("--io-depth", o.io.queue_depth, "Expert reads in flight at once")->check(CLI::Range(1, 4096))->capture_default_str();
  c->add_option_function<std::string>(
      "--io-split",
      [&o](const std::string& v) {
        auto bytes = parse_size(v);
        if (!bytes || *bytes < 4096 || *bytes > (1u << 30)) throw CLI::ValidationError("--io-split", "expected a size from 4K to 1G");
        o.io.max_read_bytes = static_cast<uint32_t>(*bytes);
      },
      "Split expert reads into pieces of at most this size (default 1M)");
  c->add_flag("--buffered-io", o.io.force_buffered, "Read experts through the page cache (dropped after each read) instead of O_DIRECT");
  c->add_option("--stats-file", o.stats_file, "Write one JSON line of pager counters per forward pass to this file");
  c->add_option("--trace-routing", o.trace_routing,
                "Record every forward pass's expert choices and weights to this file, for epq replay (docs/ROUTING_TRACE.md)");
  c->add_option_function<std::string>(
       "--prefetch", [&o](const std::string& v) { o.prefetch = pager::parse_prefetch(v); },
       "Paged runs: read the experts the next layer will likely ask for while the disk would idle: gate (the default: the next "
       "layer's router on this layer's input; off with --route-trace), history (experts that followed these before) or off; "
       "docs/CACHING.md")
      ->check(CLI::IsMember(pager::prefetch_names()));
  c->add_option("--route-trace", o.route_trace,
                "Benchmarks: replace the routers' choices by this routing trace's, mapped onto the model (docs/CACHING.md); "
                "the outputs are then not the model's")
      ->check(CLI::ExistingFile);
}

void add_sampler_flags(CLI::App* c, runtime::SamplerOptions& o) {
  using runtime::kMaxRepeatLastN, runtime::kMaxRepeatPenalty, runtime::kMaxTemperature, runtime::kMaxTopK;
  c->add_option("--temp", o.temperature, "Temperature; 0 is greedy")->check(finite_range(0, kMaxTemperature))->capture_default_str();
  c->add_option("--top-k", o.top_k, "Keep the k most likely tokens (0: off)")->check(CLI::Range(0, kMaxTopK))->capture_default_str();
  c->add_option("--top-p", o.top_p, "Nucleus sampling threshold (1: off)")->check(finite_range(0, 1))->capture_default_str();
  c->add_option("--min-p", o.min_p, "Drop tokens below min-p x the top probability (0: off)")->check(finite_range(0, 1))->capture_default_str();
  c->add_option("--repeat-penalty", o.repeat_penalty, "Penalty for recently seen tokens (1: off)")
      ->check(finite_range(0, kMaxRepeatPenalty))
      ->capture_default_str();
  c->add_option("--repeat-last-n", o.repeat_last_n, "How many recent tokens the penalty looks at (-1: all)")
      ->check(CLI::Range(-1, kMaxRepeatLastN))
      ->capture_default_str();
  c->add_option("--seed", o.seed, "Random seed for sampling")->capture_default_str();
}

}  // namespace epq::app
