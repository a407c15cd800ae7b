#pragma once
// Qwen3.5 / Qwen3.6 MoE (general.architecture "qwen35moe"): Qwen3.6-35B-A3B.
#include <memory>

#include "models/model.h"

namespace epq::models {

ModelInfo qwen35moe_info(const gguf::File& file, const ModelOptions& options);
uint64_t qwen35moe_state_bytes(const gguf::File& file, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads);
std::unique_ptr<Model> load_qwen35moe(const gguf::File& file, const ResidentWeights& weights, const ModelOptions& options);

}  // namespace epq::models
