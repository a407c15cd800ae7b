#pragma once
// A loaded model ready to run: the GGUF file, the tokenizer, the architecture with its
// resident weights, the source of routed experts, and the thread pool.
#include <memory>
#include <optional>
#include <string>

#include "core/thread_pool.h"
#include "gguf/file.h"
#include "models/model.h"
#include "text/tokenizer.h"

namespace epq::runtime {

struct EngineOptions {
  std::string model_path;
  int n_ctx = 4096;
  int n_threads = 0;  // 0: physical cores
  int n_batch = 64;   // tokens per forward pass when processing a prompt
  std::optional<int> expert_used;
};

class Engine {
 public:
  explicit Engine(const EngineOptions& options);
  ~Engine();

  const EngineOptions& options() const { return options_; }
  const gguf::File& file() const { return file_; }
  const models::Model& model() const { return *model_; }
  const models::ModelInfo& info() const { return model_->info(); }
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  models::ExpertSource& experts() { return *experts_; }
  ThreadPool& pool() { return *pool_; }
  std::unique_ptr<models::ForwardState> new_state() const;

 private:
  EngineOptions options_;
  gguf::File file_;
  std::optional<text::Tokenizer> tokenizer_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::ExpertSource> experts_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace epq::runtime
