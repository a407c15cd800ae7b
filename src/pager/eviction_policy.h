#pragma once
// Which cached expert to evict when a slot is needed. A policy only ranks candidates:
// the pager never offers it a pinned slot (one the current layer still needs), and takes
// empty slots before asking. Lower keys are evicted first.
//
//   lru     least recently used.
//   ls      Least-Stale (SpecMD): experts not used in the current forward pass ("stale")
//           before those used in it ("current"); within each, lowest layer first (FIFO).
//   ls-pos  position-aware Least-Stale: stale-left, current-left, stale-right,
//           current-right, where left means at or before the layer being computed; within
//           each group the highest layer first, the one whose next use is farthest away.
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

namespace epq::pager {

struct SlotUse {
  int layer;
  uint64_t last_use;  // pager tick of the last request
  int64_t last_pass;  // forward pass of the last request
};

struct EvictionContext {
  int layer;     // layer being computed
  int64_t pass;  // current forward pass
};

using VictimKey = std::tuple<int64_t, int64_t, uint64_t>;

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual const char* name() const = 0;
  virtual VictimKey key(const SlotUse& slot, const EvictionContext& ctx) const = 0;
};

// "lru", "ls" or "ls-pos"; throws an Error naming the choices otherwise.
std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name);

}  // namespace epq::pager
