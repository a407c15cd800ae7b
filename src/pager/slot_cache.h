#pragma once
// The pager's decisions without its I/O: which expert each arena slot holds, which slots
// the current layer has pinned, and, when a miss needs a slot, which one it gets (an
// empty slot of the layer's size class, else the policy's victim among the unpinned).
// The pager moves the bytes; `epq replay` drives the same object with no file at all, so
// a replayed trace and a paged run make the same choices and count the same hits.
//
// One request is one layer's distinct experts: begin(layer), then lookup() each expert
// (a hit is pinned), then place() each miss (pinned; -1 when every slot of the class is
// pinned: unpin delivered experts and place again). A layer at or before the previous
// request's starts a new forward pass.
#include <cstdint>
#include <memory>
#include <vector>

#include "pager/eviction_policy.h"
#include "pager/pager_stats.h"
#include "pager/size_classes.h"

namespace epq::pager {

class SlotCache {
 public:
  // slots_per_class: one count (at least 1) per class; slots are numbered class by class.
  SlotCache(const SizeClasses& classes, const std::vector<int64_t>& slots_per_class, std::unique_ptr<EvictionPolicy> policy);

  void begin(int layer);
  // The slot holding `expert` of the current layer, pinned and marked used; -1 on a miss.
  int lookup(int expert);
  // A slot for a missed expert of the current layer, now holding it and pinned; -1 if
  // every slot of its class is pinned.
  int place(int expert) { return take_slot(layer_, expert); }
  // Prefetch: a slot for `expert` of any routed `layer`, taken as place() takes one (an
  // empty slot, else the policy's next victim) and pinned; -1 if all of its class are
  // pinned. Not a request: no hit or miss is counted and the policy is not told.
  int place_ahead(int layer, int expert) { return take_slot(layer, expert); }
  // Whether `expert` of `layer` is in a slot (counts nothing).
  bool holds(int layer, int expert) const { return slot_of_[key(layer, expert)] >= 0; }
  void unpin(int slot) { --slots_[static_cast<size_t>(slot)].pins; }
  // Unpins every slot.
  void unpin_all();
  // Empties a slot whose expert's bytes never fully arrived (a failed read): the next
  // request for that expert misses and reads it again. Counts nothing.
  void forget(int slot);

  struct Slot {
    int cls;
    int layer = -1, expert = -1;  // -1: empty
    int pins = 0;
    uint64_t last_use = 0;
    int64_t last_pass = -1;
  };
  const Slot& slot(int s) const { return slots_[static_cast<size_t>(s)]; }
  size_t n_slots() const { return slots_.size(); }
  int layer() const { return layer_; }
  int64_t pass() const { return pass_; }
  const EvictionPolicy& policy() const { return *policy_; }
  // Requests, hits, misses and evictions are counted here; the pager adds its I/O
  // counters (bytes_read, reads, io_wait_ms) to the same struct.
  PagerStats& stats() { return stats_; }
  const PagerStats& stats() const { return stats_; }

 private:
  size_t key(int layer, int expert) const { return static_cast<size_t>(layer) * static_cast<size_t>(max_expert_) + static_cast<size_t>(expert); }
  void touch(Slot& slot);
  int take_slot(int layer, int expert);

  std::unique_ptr<EvictionPolicy> policy_;
  std::vector<int> class_of_layer_;
  std::vector<int> n_expert_;  // per layer
  std::vector<Slot> slots_;
  std::vector<std::vector<int>> class_slots_;
  std::vector<int> slot_of_;  // layer * max_expert + expert -> slot, or -1
  int max_expert_ = 0;
  int layer_ = -1;
  int64_t pass_ = 0;
  uint64_t tick_ = 0;
  PagerStats stats_;
};

}  // namespace epq::pager
