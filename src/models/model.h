#pragma once
// The interface every architecture implements, and the registry that picks one by
// general.architecture. A Model holds resident weights and the file's expert layout; the
// per-sequence state (KV cache, scratch) lives in a ForwardState it creates.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "gguf/file.h"
#include "models/expert_layout.h"
#include "models/expert_source.h"
#include "models/resident_weights.h"

namespace epq::models {

struct ModelInfo {
  std::string architecture;
  std::string name;
  int n_vocab = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_ctx_train = 0;
  int n_expert = 0;
  int n_expert_used = 0;  // after any override
  uint64_t recurrent_bytes = 0;  // per sequence: state that cannot be rolled back (0 without recurrent layers)
  std::vector<ExpertLayout> experts;  // per layer (empty for layers without experts)
};

struct ModelOptions {
  std::optional<int> expert_used;  // override top-k (for ablations)
  // Recurrent layers evaluate prompt batches with the chunked form of their rule instead
  // of token by token (see core/delta_rule.h).
  bool chunked_delta_rule = false;
};

class ForwardState {
 public:
  virtual ~ForwardState() = default;
  virtual int n_ctx() const = 0;
  // Recurrent layers' state (ModelInfo::recurrent_bytes bytes): a KV cache is rolled back
  // by forgetting positions, this state only by restoring a copy saved at that position.
  virtual void save_recurrent(uint8_t*) const {}
  virtual void load_recurrent(const uint8_t*) {}
  virtual void reset_recurrent() {}
  // The oldest position a sequence now at `position` can be rolled back to by forgetting
  // positions: sliding-window caches overwrite what falls out of their window (0: any).
  virtual int32_t oldest_rollback(int32_t) const { return 0; }
};

// Timing of the last forward() call's parts, in milliseconds.
struct ForwardTiming {
  double expert_wait_ms = 0;  // blocked in ExpertSource::next
  double total_ms = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  virtual std::unique_ptr<ForwardState> new_state(int n_ctx, int max_tokens, int n_threads) const = 0;
  // Evaluates tokens at positions pos0, pos0+1, ... (the KV cache must hold 0..pos0-1).
  // Writes n_vocab logits for every token if all_logits, else for the last one only.
  virtual void forward(ForwardState& state, ExpertSource& experts, ThreadPool& pool, std::span<const int32_t> tokens,
                       int32_t pos0, bool all_logits, float* logits, ForwardTiming* timing) const = 0;
};

// The ModelInfo of an architecture whose layers first_moe_layer.. n_layer-1 have routed
// experts, with the expert tensors checked against the metadata ("<arch>.expert_*").
struct MoeShape;
struct ModelDims {
  int n_vocab, n_embd, n_layer, n_ctx_train;
};
ModelInfo moe_model_info(const gguf::File& file, const std::string& arch, const ModelDims& dims, const MoeShape& moe,
                         int first_moe_layer);

// The architectures EPQ runs, e.g. "qwen3moe".
std::vector<std::string> supported_architectures();
// Reads the model's shape from the file (no tensor data needed): for the memory plan.
ModelInfo read_model_info(const gguf::File& file, const ModelOptions& options);
// Bytes new_state(n_ctx, max_tokens, n_threads) will allocate (KV cache and scratch).
uint64_t forward_state_bytes(const gguf::File& file, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads);
std::unique_ptr<Model> load_model(const gguf::File& file, const ResidentWeights& weights, const ModelOptions& options);

}  // namespace epq::models
