// The architecture registry: general.architecture -> reader of its shape and loader.
#include <fmt/format.h>

#include "models/deepseek2.h"
#include "models/laguna.h"
#include "models/model.h"
#include "models/qwen35moe.h"
#include "models/qwen3moe.h"
#include "util/error.h"

namespace epq::models {
namespace {

struct Architecture {
  const char* name;
  ModelInfo (*info)(const gguf::File&, const ModelOptions&);
  uint64_t (*state_bytes)(const gguf::File&, const ModelOptions&, int, int, int);
  std::unique_ptr<Model> (*load)(const gguf::File&, const ResidentWeights&, const ModelOptions&);
};

const Architecture kArchitectures[] = {
    {"qwen3moe", qwen3moe_info, qwen3moe_state_bytes, load_qwen3moe},
    {"qwen35moe", qwen35moe_info, qwen35moe_state_bytes, load_qwen35moe},
    {"laguna", laguna_info, laguna_state_bytes, load_laguna},
    {"deepseek2", deepseek2_info, deepseek2_state_bytes, load_deepseek2},
    {"xing4_0", deepseek2_info, deepseek2_state_bytes, load_deepseek2},
};

const Architecture& find(const gguf::File& file) {
  const std::string arch = file.get_string("general.architecture");
  if (arch == "qwen3next") {
    fail("{}: architecture 'qwen3next' (Qwen3-Next) is not supported yet: its linear-attention projections are fused and laid "
         "out differently; its successors Qwen3.5 and Qwen3.6 (architecture qwen35moe) run", file.path());
  }
  for (const Architecture& a : kArchitectures) {
    if (arch == a.name) return a;
  }
  fail("{}: unsupported architecture '{}' (supported: {})", file.path(), arch, fmt::join(supported_architectures(), ", "));
}

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> out;
  for (const Architecture& a : kArchitectures) out.emplace_back(a.name);
  return out;
}

ModelInfo read_model_info(const gguf::File& file, const ModelOptions& options) { return find(file).info(file, options); }

uint64_t forward_state_bytes(const gguf::File& file, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads) {
  return find(file).state_bytes(file, options, n_ctx, max_tokens, n_threads);
}

std::unique_ptr<Model> load_model(const gguf::File& file, const ResidentWeights& weights, const ModelOptions& options) {
  return find(file).load(file, weights, options);
}

}  // namespace epq::models
