#pragma once
// DeepSeek-V2/V3-class models (general.architecture "deepseek2": DeepSeek-V3/R1, Kimi-K2,
// ...) and Xing4.0 ("xing4_0": the same layers with hyper-connections).
#include <memory>

#include "models/model.h"

namespace epq::models {

ModelInfo deepseek2_info(const gguf::File& file, const ModelOptions& options);
uint64_t deepseek2_state_bytes(const gguf::File& file, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads);
std::unique_ptr<Model> load_deepseek2(const gguf::File& file, const ResidentWeights& weights, const ModelOptions& options);

}  // namespace epq::models
