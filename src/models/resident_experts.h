#pragma once
// ExpertSource over a fully mapped model (every shard): every expert is always ready.
#include <cstdint>
#include <vector>

#include "gguf/file.h"
#include "models/expert_layout.h"
#include "models/expert_source.h"

namespace epq::models {

Matrix expert_matrix(const ExpertPart& part, const uint8_t* data);

class ResidentExperts : public ExpertSource {
 public:
  ResidentExperts(const gguf::File& file, std::vector<ExpertLayout> layouts);
  void begin(int layer, std::span<const int> experts) override;
  bool next(std::vector<ReadyExpert>& ready) override;

 private:
  const uint8_t* data(const ExpertPart& part, int expert) const;

  std::vector<const uint8_t*> shard_base_;  // each shard's mapping
  std::vector<ExpertLayout> layouts_;
  int layer_ = 0;
  std::vector<int> pending_;
};

}  // namespace epq::models
