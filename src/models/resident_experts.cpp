#include "models/resident_experts.h"

namespace epq::models {

Matrix expert_matrix(const ExpertPart& part, const uint8_t* data, bool rows4) {
  return {part.type, data, part.rows, part.cols, static_cast<size_t>(quant::row_bytes(part.type, part.cols)), rows4};
}

ResidentExperts::ResidentExperts(const gguf::File& file, std::vector<ExpertLayout> layouts, const ResidentWeights& weights)
    : layouts_(std::move(layouts)), parts_(layouts_.size()) {
  for (size_t l = 0; l < layouts_.size(); ++l) {
    if (layouts_[l].n_expert == 0) continue;
    for (int p = 0; p < 3; ++p) {
      const std::string name = expert_tensor_name(static_cast<int>(l), p);
      parts_[l][static_cast<size_t>(p)] = {weights.get(file, name), weights.rows4(name)};
    }
  }
}

Matrix ResidentExperts::matrix(int part, int expert) const {
  const ExpertPart& p = layouts_[static_cast<size_t>(layer_)].part(part);
  const PartData& d = parts_[static_cast<size_t>(layer_)][static_cast<size_t>(part)];
  return expert_matrix(p, d.expert0 + static_cast<uint64_t>(expert) * p.bytes, d.rows4);
}

void ResidentExperts::begin(int layer, std::span<const int> experts) {
  layer_ = layer;
  pending_.assign(experts.begin(), experts.end());
}

bool ResidentExperts::next(std::vector<ReadyExpert>& ready) {
  ready.clear();
  for (size_t i = 0; i < pending_.size(); ++i) {
    const int e = pending_[i];
    ready.push_back({static_cast<int>(i), matrix(0, e), matrix(1, e), matrix(2, e)});
  }
  pending_.clear();
  return !ready.empty();
}

}  // namespace epq::models
