#pragma once
// ExpertSource over a model that is all in RAM: every expert is always ready, in the file's
// mapping or in the buffer the weights were read into (ResidentWeights).
#include <array>
#include <cstdint>
#include <vector>

#include "gguf/file.h"
#include "models/expert_layout.h"
#include "models/expert_source.h"
#include "models/resident_weights.h"

namespace epq::models {

// Expert matrix `part` at `data`, in the file's layout or (rows4) the four-row layout.
Matrix expert_matrix(const ExpertPart& part, const uint8_t* data, bool rows4 = false);

class ResidentExperts : public ExpertSource {
 public:
  // `weights` holds every layer's routed expert tensors.
  ResidentExperts(const gguf::File& file, std::vector<ExpertLayout> layouts, const ResidentWeights& weights);
  void begin(int layer, std::span<const int> experts) override;
  bool next(std::vector<ReadyExpert>& ready) override;

 private:
  struct PartData {
    const uint8_t* expert0 = nullptr;  // expert 0's matrix; expert e's is e matrices further
    bool rows4 = false;
  };
  Matrix matrix(int part, int expert) const;

  std::vector<ExpertLayout> layouts_;
  std::vector<std::array<PartData, 3>> parts_;  // by layer: gate, up, down
  int layer_ = 0;
  std::vector<int> pending_;
};

}  // namespace epq::models
