#pragma once
// Where routed-expert weights come from during a forward pass: all in RAM
// (ResidentExperts) or paged from the file (the pager). For each MoE layer the model calls
// begin() with the distinct experts its tokens chose, then next() until it returns false,
// computing each batch of experts as it becomes ready. Before begin(), it tells routed()
// each token's choice (for recording traces and replaying them; sources ignore it).
#include <span>
#include <vector>

#include "core/matrix.h"

namespace epq::models {

struct ReadyExpert {
  int index;  // position in the list given to begin()
  Matrix gate, up, down;
};

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  // One token of the coming request chose `experts` (top-k order) with `weights`. A source
  // may overwrite both with another choice (`bench --route-trace`); the block computes
  // what they hold afterwards.
  virtual void routed(int /*layer*/, std::span<int> /*experts*/, std::span<float> /*weights*/) {}
  // Whether the source wants predicted() (a paging source that prefetches on the stale gate).
  virtual bool wants_prediction() const { return false; }
  // Before begin(layer): a guess of the experts `next_layer` will ask for, most likely
  // first (see RoutedMoe::forward).
  virtual void predicted(int /*next_layer*/, std::span<const int> /*experts*/) {}
  // Starts a layer's request. Experts delivered for an earlier request are released.
  virtual void begin(int layer, std::span<const int> experts) = 0;
  // Releases the experts delivered by the previous call, then waits until at least one
  // more requested expert is in memory and replaces `ready` with the newly ready ones.
  // Their views stay valid until the next call. Returns false when all were delivered.
  virtual bool next(std::vector<ReadyExpert>& ready) = 0;
};

}  // namespace epq::models
