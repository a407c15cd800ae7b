#pragma once
// poolside Laguna (general.architecture "laguna"): Laguna-XS.2, M.1 and S-2.1.
#include <memory>

#include "models/model.h"

namespace epq::models {

ModelInfo laguna_info(const gguf::File& file, const ModelOptions& options);
uint64_t laguna_state_bytes(const gguf::File& file, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads);
std::unique_ptr<Model> load_laguna(const gguf::File& file, const ResidentWeights& weights, const ModelOptions& options);

}  // namespace epq::models
