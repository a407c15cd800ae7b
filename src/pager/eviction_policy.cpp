#include "pager/eviction_policy.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace epq::pager {
namespace {

bool is_current(const SlotUse& s, const EvictionContext& c) { return s.last_pass == c.pass; }
bool is_left(const SlotUse& s, const EvictionContext& c) { return s.layer <= c.layer; }

class Lru : public EvictionPolicy {
 public:
  const char* name() const override { return "lru"; }
  VictimKey key(const SlotUse& s, const EvictionContext&) const override { return {0, 0, 0, s.last_use}; }
};

class LeastStale : public EvictionPolicy {
 public:
  const char* name() const override { return "ls"; }
  VictimKey key(const SlotUse& s, const EvictionContext& c) const override { return {is_current(s, c), s.layer, 0, s.last_use}; }
};

class PositionAwareLeastStale : public EvictionPolicy {
 public:
  const char* name() const override { return "ls-pos"; }
  VictimKey key(const SlotUse& s, const EvictionContext& c) const override {
    const int64_t group = (is_left(s, c) ? 0 : 2) + (is_current(s, c) ? 1 : 0);
    return {group, -s.layer, 0, s.last_use};
  }
};

// Scores every expert ever requested by its decayed request count (see the header).
class Lrfu : public EvictionPolicy {
 public:
  const char* name() const override { return "lrfu"; }
  void requested(int layer, int expert, const EvictionContext& c) override {
    n_layer_ = std::max(n_layer_, layer + 1);
    if (static_cast<size_t>(layer) >= score_.size()) score_.resize(static_cast<size_t>(layer) + 1);
    std::vector<double>& row = score_[static_cast<size_t>(layer)];
    if (static_cast<size_t>(expert) >= row.size()) row.resize(static_cast<size_t>(expert) + 1, 0.0);
    // Scores are kept multiplied by 2^((pass - base) / half-life), so that comparing them
    // needs no decay; before that factor overflows, every score is divided by a power of
    // two (which moves every bucket below by the same whole number).
    const int64_t octaves = (c.pass - base_pass_) / static_cast<int64_t>(kLrfuHalfLife);
    if (octaves > 512) {
      for (auto& r : score_) {
        for (double& x : r) x = std::ldexp(x, -static_cast<int>(octaves));
      }
      base_pass_ += octaves * static_cast<int64_t>(kLrfuHalfLife);
    }
    const double w = std::exp2(static_cast<double>(c.pass - base_pass_) / kLrfuHalfLife);
    row[static_cast<size_t>(expert)] += w;
  }
  VictimKey key(const SlotUse& s, const EvictionContext& c) const override {
    // Scores within a bucket count as equal; among those, the expert whose layer comes
    // round again last goes first (as in ls-pos), then the least recently used. An
    // expert never requested (a prefetch) scores 0: its bucket is -infinity.
    const double bucket = std::floor(std::log2(score(s.layer, s.expert)) * kLrfuBucketsPerOctave);
    const int64_t turn = s.layer > c.layer ? s.layer - c.layer : s.layer - c.layer + n_layer_;
    return {0, bucket, -turn, s.last_use};
  }

 private:
  double score(int layer, int expert) const {
    if (static_cast<size_t>(layer) >= score_.size()) return 0;
    const std::vector<double>& row = score_[static_cast<size_t>(layer)];
    return static_cast<size_t>(expert) < row.size() ? row[static_cast<size_t>(expert)] : 0;
  }

  int64_t base_pass_ = 0;
  int n_layer_ = 0;  // layers seen
  std::vector<std::vector<double>> score_;  // [layer][expert]
};

}  // namespace

const std::vector<std::string>& eviction_policy_names() {
  static const std::vector<std::string> names = {"lrfu", "lru", "ls", "ls-pos"};
  return names;
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name) {
  if (name == "lru") return std::make_unique<Lru>();
  if (name == "ls") return std::make_unique<LeastStale>();
  if (name == "ls-pos") return std::make_unique<PositionAwareLeastStale>();
  if (name == "lrfu") return std::make_unique<Lrfu>();
  std::string choices;
  for (const std::string& n : eviction_policy_names()) choices += (choices.empty() ? "" : ", ") + n;
  fail("unknown eviction policy '{}' (choose {})", name, choices);
}

}  // namespace epq::pager
