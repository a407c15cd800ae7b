#pragma once
// Which cached expert to evict when a slot is needed. A policy only ranks candidates:
// the pager never offers it a pinned slot (one the current layer still needs), and takes
// empty slots before asking. Lower keys are evicted first.
//
//   lrfu    (the default) least recently/frequently used (Lee et al., "LRFU", 2001): every
//           expert ever requested, cached or not, scores the sum over its requests of
//           2^-(age / kLrfuHalfLife), age in forward passes. The lowest score goes
//           first; scores within a factor 2^(1/kLrfuBucketsPerOctave) of each other tie,
//           and ties go as in ls-pos: the expert whose layer comes round again last
//           (ahead of the layer being computed, the farthest), then LRU. Frequency keeps
//           the experts a router favours through runs of one-off choices (decode); the
//           tie rule keeps a fixed part of each layer when prompt batches ask for nearly
//           every expert each pass, where LRU hits nothing. docs/CACHING.md has the
//           traces behind it.
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
#include <vector>

namespace epq::pager {

// lrfu: a request's weight halves every this many forward passes; scores are compared
// in buckets of a quarter octave.
inline constexpr double kLrfuHalfLife = 256;
inline constexpr double kLrfuBucketsPerOctave = 4;

struct SlotUse {
  int layer;
  uint64_t last_use;  // pager tick of the last request
  int64_t last_pass;  // forward pass of the last request
  int expert = 0;
};

struct EvictionContext {
  int layer;     // layer being computed
  int64_t pass;  // current forward pass
};

using VictimKey = std::tuple<int64_t, double, int64_t, uint64_t>;

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual const char* name() const = 0;
  // Told each expert a request asks for, hit or miss, before any victim is chosen for it
  // (for policies that learn from the history of requests).
  virtual void requested(int /*layer*/, int /*expert*/, const EvictionContext& /*ctx*/) {}
  virtual VictimKey key(const SlotUse& slot, const EvictionContext& ctx) const = 0;
};

// The policies by name, the default first.
const std::vector<std::string>& eviction_policy_names();
// One of eviction_policy_names(); throws an Error naming the choices otherwise.
std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name);

}  // namespace epq::pager
