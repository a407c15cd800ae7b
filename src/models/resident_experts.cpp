#include "models/resident_experts.h"

namespace epq::models {

Matrix expert_matrix(const ExpertPart& part, const uint8_t* data, bool rows4) {
  return {part.type, data, part.rows, part.cols, static_cast<size_t>(quant::row_bytes(part.type, part.cols)), rows4};
}

ResidentExperts::ResidentExperts(const gguf::File& file, std::vector<ExpertLayout> layouts) : layouts_(std::move(layouts)) {
  for (uint32_t s = 0; s < file.shards().size(); ++s) shard_base_.push_back(file.mapping(s));
}

const uint8_t* ResidentExperts::data(const ExpertPart& part, int expert) const {
  return shard_base_[part.shard] + part.expert_offset(expert);
}

void ResidentExperts::begin(int layer, std::span<const int> experts) {
  layer_ = layer;
  pending_.assign(experts.begin(), experts.end());
}

bool ResidentExperts::next(std::vector<ReadyExpert>& ready) {
  ready.clear();
  const ExpertLayout& l = layouts_[static_cast<size_t>(layer_)];
  for (size_t i = 0; i < pending_.size(); ++i) {
    const int e = pending_[i];
    ready.push_back({static_cast<int>(i), expert_matrix(l.gate, data(l.gate, e)), expert_matrix(l.up, data(l.up, e)),
                     expert_matrix(l.down, data(l.down, e))});
  }
  pending_.clear();
  return !ready.empty();
}

}  // namespace epq::models
