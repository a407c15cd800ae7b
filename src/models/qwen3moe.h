#pragma once
// Qwen3-MoE (general.architecture "qwen3moe"): Qwen3-30B-A3B, Qwen3-235B-A22B.
#include <memory>

#include "models/model.h"

namespace epq::models {

ModelInfo qwen3moe_info(const gguf::File& file, const ModelOptions& options);
uint64_t qwen3moe_state_bytes(const gguf::File& file, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads);
std::unique_ptr<Model> load_qwen3moe(const gguf::File& file, const ResidentWeights& weights, const ModelOptions& options);

}  // namespace epq::models
