#include "app/engine_flags.h"

namespace epq::app {

void add_engine_flags(CLI::App* c, runtime::EngineOptions& o) {
  c->add_option("-m,--model", o.model_path, "GGUF model file")->required();
  c->add_option("-c,--ctx", o.n_ctx, "Context length in tokens")->capture_default_str();
  c->add_option("-t,--threads", o.n_threads, "Compute threads (default: physical cores)");
  c->add_option("-b,--batch", o.n_batch, "Prompt tokens per forward pass")->capture_default_str();
  c->add_option("--expert-used", o.expert_used, "Override the model's experts per token (top-k), for ablations")
      ->envname("EPQ_EXPERT_USED");
}

void add_sampler_flags(CLI::App* c, runtime::SamplerOptions& o) {
  c->add_option("--temp", o.temperature, "Temperature; 0 is greedy")->capture_default_str();
  c->add_option("--top-k", o.top_k, "Keep the k most likely tokens (0: off)")->capture_default_str();
  c->add_option("--top-p", o.top_p, "Nucleus sampling threshold (1: off)")->capture_default_str();
  c->add_option("--min-p", o.min_p, "Drop tokens below min-p x the top probability (0: off)")->capture_default_str();
  c->add_option("--repeat-penalty", o.repeat_penalty, "Penalty for recently seen tokens (1: off)")->capture_default_str();
  c->add_option("--repeat-last-n", o.repeat_last_n, "How many recent tokens the penalty looks at")->capture_default_str();
  c->add_option("--seed", o.seed, "Random seed for sampling")->capture_default_str();
}

}  // namespace epq::app
