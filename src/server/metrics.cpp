#include "server/metrics.h"

#include <fmt/format.h>

namespace epq::server {

void Metrics::request(bool chat) {
  std::lock_guard lock(mu_);
  ++(chat ? chat_requests_ : completion_requests_);
}

void Metrics::failure(int status) {
  std::lock_guard lock(mu_);
  ++(status >= 500 ? server_errors_ : client_errors_);
}

void Metrics::generation(int prompt_tokens, double prompt_seconds, int generated_tokens, double generation_seconds,
                         const pager::PagerStats* pager) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  generated_tokens_ += static_cast<uint64_t>(generated_tokens);
  prompt_seconds_ += prompt_seconds;
  generation_seconds_ += generation_seconds;
  if (prompt_seconds > 0) last_prompt_tps_ = prompt_tokens / prompt_seconds;
  if (generation_seconds > 0 && generated_tokens > 1) last_generation_tps_ = (generated_tokens - 1) / generation_seconds;
  if (pager) pager_ = *pager, paged_ = true;
}

std::string Metrics::render(size_t queue_depth, size_t running, const runtime::BatchedPasses::Counts& steps, uint64_t arena_bytes) const {
  std::lock_guard lock(mu_);
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, const std::string& samples) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}", name, help, name, type, samples);
  };
  auto one = [](const char* name, double v) { return fmt::format("{} {}\n", name, v); };
  metric("epq_requests_total", "counter", "Completion requests received, by endpoint.",
         fmt::format("epq_requests_total{{endpoint=\"chat\"}} {}\nepq_requests_total{{endpoint=\"completions\"}} {}\n", chat_requests_,
                     completion_requests_));
  metric("epq_request_errors_total", "counter", "Requests answered with an error, by class.",
         fmt::format("epq_request_errors_total{{class=\"4xx\"}} {}\nepq_request_errors_total{{class=\"5xx\"}} {}\n", client_errors_,
                     server_errors_));
  metric("epq_prompt_tokens_total", "counter", "Prompt tokens processed.", one("epq_prompt_tokens_total", static_cast<double>(prompt_tokens_)));
  metric("epq_generated_tokens_total", "counter", "Tokens generated.", one("epq_generated_tokens_total", static_cast<double>(generated_tokens_)));
  metric("epq_prompt_seconds_total", "counter", "Time spent on prompts.", one("epq_prompt_seconds_total", prompt_seconds_));
  metric("epq_generation_seconds_total", "counter", "Time spent generating.", one("epq_generation_seconds_total", generation_seconds_));
  metric("epq_prompt_tokens_per_second", "gauge", "Prompt throughput of the last request.", one("epq_prompt_tokens_per_second", last_prompt_tps_));
  metric("epq_generation_tokens_per_second", "gauge", "Generation throughput of the last request.",
         one("epq_generation_tokens_per_second", last_generation_tps_));
  metric("epq_queue_depth", "gauge", "Requests queued or running.", one("epq_queue_depth", static_cast<double>(queue_depth)));
  metric("epq_sequences_running", "gauge", "Generations decoding now (at most --parallel).", one("epq_sequences_running", static_cast<double>(running)));
  metric("epq_batch_steps_total", "counter", "Forward steps of the running generations (one pass of each, run together).",
         one("epq_batch_steps_total", static_cast<double>(steps.steps)));
  metric("epq_batch_passes_total", "counter", "Sequences' passes in those steps (divided by the steps: the mean batch).",
         one("epq_batch_passes_total", static_cast<double>(steps.passes)));
  metric("epq_batch_shared_steps_total", "counter", "Steps that carried more than one sequence.",
         one("epq_batch_shared_steps_total", static_cast<double>(steps.shared_steps)));
  metric("epq_batch_deferred_passes_total", "counter",
         "Prompt passes that waited for a later step, as the step's prompt tokens reached --batch.",
         one("epq_batch_deferred_passes_total", static_cast<double>(steps.deferred_passes)));
  metric("epq_batch_shared_products_total", "counter",
         "Products of the model's own weights run once for the tokens of several sequences (one read of the matrix for all).",
         one("epq_batch_shared_products_total", static_cast<double>(steps.shared_products)));
  if (paged_ || arena_bytes > 0) {
    metric("epq_pager_arena_bytes", "gauge", "Size of the expert arena.", one("epq_pager_arena_bytes", static_cast<double>(arena_bytes)));
    metric("epq_pager_hits_total", "counter", "Expert requests served from the arena.", one("epq_pager_hits_total", static_cast<double>(pager_.hits)));
    metric("epq_pager_misses_total", "counter", "Expert requests read from the file.", one("epq_pager_misses_total", static_cast<double>(pager_.misses)));
    metric("epq_pager_bytes_read_total", "counter", "Bytes the pager read from the file.",
           one("epq_pager_bytes_read_total", static_cast<double>(pager_.bytes_read)));
    metric("epq_pager_evictions_total", "counter", "Experts evicted from the arena.",
           one("epq_pager_evictions_total", static_cast<double>(pager_.evictions())));
  }
  return out;
}

}  // namespace epq::server
