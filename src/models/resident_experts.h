#pragma once
// ExpertSource over a fully mapped model file: every expert is always ready.
#include <cstdint>
#include <vector>

#include "models/expert_layout.h"
#include "models/expert_source.h"

namespace epq::models {

Matrix expert_matrix(const ExpertPart& part, const uint8_t* data);

class ResidentExperts : public ExpertSource {
 public:
  ResidentExperts(const uint8_t* file_base, std::vector<ExpertLayout> layouts);
  void begin(int layer, std::span<const int> experts) override;
  bool next(std::vector<ReadyExpert>& ready) override;

 private:
  const uint8_t* base_;
  std::vector<ExpertLayout> layouts_;
  int layer_ = 0;
  std::vector<int> pending_;
};

}  // namespace epq::models
