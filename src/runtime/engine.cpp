#include "runtime/engine.h"

#include "models/resident_experts.h"
#include "util/error.h"

namespace epq::runtime {

Engine::Engine(const EngineOptions& options) : options_(options), file_(gguf::File::open(options.model_path)) {
  if (options_.n_ctx < 1) fail("--ctx must be at least 1, got {}", options_.n_ctx);
  if (options_.n_batch < 1) fail("--batch must be at least 1, got {}", options_.n_batch);
  if (options_.n_threads <= 0) options_.n_threads = physical_core_count();
  tokenizer_.emplace(text::Tokenizer::from_gguf(file_));
  const models::ModelOptions model_options{options_.expert_used};
  model_ = models::load_model(file_, models::ResidentWeights::from_mapping(file_), model_options);
  if (tokenizer_->n_vocab() != model_->info().n_vocab) {
    fail("{}: tokenizer has {} tokens but the model's vocabulary is {}", file_.path(), tokenizer_->n_vocab(), model_->info().n_vocab);
  }
  experts_ = std::make_unique<models::ResidentExperts>(file_.mapping(), model_->info().experts);
  pool_ = std::make_unique<ThreadPool>(options_.n_threads);
}

Engine::~Engine() = default;

std::unique_ptr<models::ForwardState> Engine::new_state() const {
  return model_->new_state(options_.n_ctx, options_.n_batch, options_.n_threads);
}

}  // namespace epq::runtime
