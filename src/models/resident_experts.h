#pragma once
// ExpertSource over a fully mapped model (every shard): every expert is always ready.
#include <cstdint>
#include <vector>

#include "gguf/file.h"
#include "models/expert_layout.h"
#include "models/expert_source.h"

namespace epq::models {

// Expert matrix `part` at `data`, in the file's layout or (rows4) the four-row layout.
Matrix expert_matrix(const ExpertPart& part, const uint8_t* data, bool rows4 = false);

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
