#include "pager/eviction_policy.h"

#include "util/error.h"

namespace epq::pager {
namespace {

bool is_current(const SlotUse& s, const EvictionContext& c) { return s.last_pass == c.pass; }
bool is_left(const SlotUse& s, const EvictionContext& c) { return s.layer <= c.layer; }

class Lru : public EvictionPolicy {
 public:
  const char* name() const override { return "lru"; }
  VictimKey key(const SlotUse& s, const EvictionContext&) const override { return {0, 0, s.last_use}; }
};

class LeastStale : public EvictionPolicy {
 public:
  const char* name() const override { return "ls"; }
  VictimKey key(const SlotUse& s, const EvictionContext& c) const override { return {is_current(s, c), s.layer, s.last_use}; }
};

class PositionAwareLeastStale : public EvictionPolicy {
 public:
  const char* name() const override { return "ls-pos"; }
  VictimKey key(const SlotUse& s, const EvictionContext& c) const override {
    const int64_t group = (is_left(s, c) ? 0 : 2) + (is_current(s, c) ? 1 : 0);
    return {group, -s.layer, s.last_use};
  }
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name) {
  if (name == "lru") return std::make_unique<Lru>();
  if (name == "ls") return std::make_unique<LeastStale>();
  if (name == "ls-pos") return std::make_unique<PositionAwareLeastStale>();
  fail("unknown eviction policy '{}' (choose lru, ls or ls-pos)", name);
}

}  // namespace epq::pager
