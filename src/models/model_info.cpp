#include "models/model.h"
#include "models/routed_moe.h"
#include "util/error.h"

namespace epq::models {

ModelInfo moe_model_info(const gguf::File& f, const std::string& arch, const ModelDims& dims, const MoeShape& moe, int first_moe_layer) {
  ModelInfo info;
  info.architecture = arch;
  info.name = f.get_string_or("general.name", "");
  info.n_vocab = dims.n_vocab;
  info.n_embd = dims.n_embd;
  info.n_layer = dims.n_layer;
  info.n_ctx_train = dims.n_ctx_train;
  info.n_expert = moe.n_expert;
  info.n_expert_used = moe.n_expert_used;
  info.experts.resize(static_cast<size_t>(first_moe_layer));
  for (int l = first_moe_layer; l < dims.n_layer; ++l) {
    info.experts.push_back(read_expert_layout(f, l, dims.n_embd));
    const ExpertLayout& e = info.experts.back();
    if (e.n_expert != moe.n_expert) fail("{}: layer {} has {} experts, metadata says {}", f.path(), l, e.n_expert, moe.n_expert);
    if (e.gate.rows != moe.n_ff) {
      fail("{}: layer {} experts have {} feed-forward rows, but metadata '{}.expert_feed_forward_length' says {}", f.path(), l, e.gate.rows,
           arch, moe.n_ff);
    }
  }
  return info;
}

}  // namespace epq::models
