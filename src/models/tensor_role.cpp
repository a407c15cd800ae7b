#include "models/tensor_role.h"

#include <charconv>

namespace epq::models {

TensorRole classify_tensor(std::string_view name) {
  auto has = [&](std::string_view part) { return name.find(part) != std::string_view::npos; };
  if (has("norm")) return TensorRole::kNorm;  // attn_norm, ffn_norm, attn_q_norm, output_norm...
  if (has("_exps")) return TensorRole::kRoutedExpert;
  if (has("_shexp")) return TensorRole::kSharedExpert;
  if (has("ffn_gate_inp") || has("exp_probs_b")) return TensorRole::kRouter;
  if (has("attn_")) return TensorRole::kAttention;
  if (has("ffn_")) return TensorRole::kDenseFfn;
  if (name.starts_with("token_embd")) return TensorRole::kEmbedding;
  if (name.starts_with("output")) return TensorRole::kOutput;
  return TensorRole::kOther;
}

int tensor_block(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int block = 0;
  const char* end = name.data() + name.size();
  const auto [at, error] = std::from_chars(name.data() + 4, end, block);
  return error == std::errc() && at != end && *at == '.' ? block : -1;
}

const char* role_name(TensorRole role) {
  switch (role) {
    case TensorRole::kRoutedExpert: return "routed experts";
    case TensorRole::kSharedExpert: return "shared experts";
    case TensorRole::kAttention: return "attention";
    case TensorRole::kEmbedding: return "embeddings";
    case TensorRole::kOutput: return "output";
    case TensorRole::kDenseFfn: return "dense FFN";
    case TensorRole::kRouter: return "router";
    case TensorRole::kNorm: return "norms";
    case TensorRole::kOther: return "other";
  }
  return "other";
}

}  // namespace epq::models
