#include "models/resident_experts.h"

namespace epq::models {

Matrix expert_matrix(const ExpertPart& part, const uint8_t* data) {
  return {part.type, data, part.rows, part.cols, static_cast<size_t>(quant::row_bytes(part.type, part.cols))};
}

ResidentExperts::ResidentExperts(const uint8_t* file_base, std::vector<ExpertLayout> layouts)
    : base_(file_base), layouts_(std::move(layouts)) {}

void ResidentExperts::begin(int layer, std::span<const int> experts) {
  layer_ = layer;
  pending_.assign(experts.begin(), experts.end());
}

bool ResidentExperts::next(std::vector<ReadyExpert>& ready) {
  ready.clear();
  const ExpertLayout& l = layouts_[static_cast<size_t>(layer_)];
  for (size_t i = 0; i < pending_.size(); ++i) {
    const int e = pending_[i];
    ready.push_back({static_cast<int>(i), expert_matrix(l.gate, base_ + l.gate.expert_offset(e)),
                     expert_matrix(l.up, base_ + l.up.expert_offset(e)), expert_matrix(l.down, base_ + l.down.expert_offset(e))});
  }
  pending_.clear();
  return !ready.empty();
}

}  // namespace epq::models
