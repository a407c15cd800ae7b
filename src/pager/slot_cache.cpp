#include "pager/slot_cache.h"

#include <algorithm>

#include "util/error.h"

namespace epq::pager {

SlotCache::SlotCache(const SizeClasses& classes, const std::vector<int64_t>& slots_per_class, std::unique_ptr<EvictionPolicy> policy)
    : policy_(std::move(policy)), class_of_layer_(classes.class_of_layer), n_expert_(classes.class_of_layer.size(), 0) {
  if (slots_per_class.size() != classes.classes.size()) fail("internal: {} slot counts for {} size classes", slots_per_class.size(), classes.classes.size());
  class_slots_.resize(classes.classes.size());
  for (size_t c = 0; c < classes.classes.size(); ++c) {
    if (slots_per_class[c] < 1) fail("internal: size class {} has no slots", c);
    for (int l : classes.classes[c].layers) n_expert_[static_cast<size_t>(l)] = classes.classes[c].n_expert;
    max_expert_ = std::max(max_expert_, classes.classes[c].n_expert);
    for (int64_t i = 0; i < slots_per_class[c]; ++i) {
      class_slots_[c].push_back(static_cast<int>(slots_.size()));
      slots_.push_back({static_cast<int>(c)});
    }
  }
  slot_of_.assign(class_of_layer_.size() * static_cast<size_t>(max_expert_), -1);
}

void SlotCache::begin(int layer) {
  if (layer < 0 || static_cast<size_t>(layer) >= class_of_layer_.size() || class_of_layer_[static_cast<size_t>(layer)] < 0) {
    fail("internal: layer {} has no routed experts", layer);
  }
  if (layer <= layer_) ++pass_;
  layer_ = layer;
}

void SlotCache::touch(Slot& slot) {
  ++slot.pins;
  slot.last_use = ++tick_;
  slot.last_pass = pass_;
}

int SlotCache::lookup(int expert) {
  if (expert < 0 || expert >= n_expert_[static_cast<size_t>(layer_)]) fail("internal: expert {} of layer {} is not in the file", expert, layer_);
  ++stats_.requests;
  policy_->requested(layer_, expert, {layer_, pass_});
  const int s = slot_of_[key(layer_, expert)];
  if (s < 0) {
    ++stats_.misses;
    return -1;
  }
  touch(slots_[static_cast<size_t>(s)]);
  ++stats_.hits;
  return s;
}

int SlotCache::take_slot(int layer, int expert) {
  int victim = -1;
  VictimKey best{};
  const EvictionContext ctx{layer_, pass_};
  for (int s : class_slots_[static_cast<size_t>(class_of_layer_[static_cast<size_t>(layer)])]) {
    const Slot& slot = slots_[static_cast<size_t>(s)];
    if (slot.expert < 0) {
      victim = s;
      break;
    }
    if (slot.pins > 0) continue;
    const VictimKey rank = policy_->key({slot.layer, slot.last_use, slot.last_pass, slot.expert}, ctx);
    if (victim < 0 || rank < best) victim = s, best = rank;
  }
  if (victim < 0) return -1;
  Slot& v = slots_[static_cast<size_t>(victim)];
  if (v.expert >= 0) {
    const bool current = v.last_pass == pass_, left = v.layer <= layer_;
    (current ? (left ? stats_.evictions_current_left : stats_.evictions_current_right)
             : (left ? stats_.evictions_stale_left : stats_.evictions_stale_right))++;
    slot_of_[key(v.layer, v.expert)] = -1;
  }
  v.layer = layer;
  v.expert = expert;
  v.pins = 0;
  touch(v);
  slot_of_[key(layer, expert)] = victim;
  return victim;
}

void SlotCache::forget(int s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  if (slot.expert >= 0) slot_of_[key(slot.layer, slot.expert)] = -1;
  slot.layer = slot.expert = -1;
  slot.pins = 0;
}

void SlotCache::unpin_all() {
  for (Slot& s : slots_) s.pins = 0;
}

}  // namespace epq::pager
