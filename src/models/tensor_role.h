#pragma once
// What a tensor is for, judged by its llama.cpp name; used by `inspect` to break a model
// down and by the engine to tell routed experts (paged) from resident weights.
#include <string_view>

namespace epq::models {

enum class TensorRole { kRoutedExpert, kSharedExpert, kAttention, kEmbedding, kOutput, kDenseFfn, kRouter, kNorm, kOther };

TensorRole classify_tensor(std::string_view name);
// The block of a tensor named blk.<block>.<...>, or -1 for a tensor outside the blocks.
int tensor_block(std::string_view name);
const char* role_name(TensorRole role);
inline constexpr TensorRole kAllRoles[] = {
    TensorRole::kRoutedExpert, TensorRole::kAttention, TensorRole::kEmbedding, TensorRole::kOutput,
    TensorRole::kSharedExpert, TensorRole::kDenseFfn, TensorRole::kRouter, TensorRole::kNorm,
    TensorRole::kOther};

}  // namespace epq::models
