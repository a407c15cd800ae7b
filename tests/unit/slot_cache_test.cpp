// The pager's slot bookkeeping without I/O: hits are pinned, empty slots go first, a
// pinned slot is never a victim, a full class of pinned slots says so, passes and
// evictions are counted as the pager counts them; and lrfu keeps frequent experts.
#include <gtest/gtest.h>

#include <vector>

#include "pager/eviction_policy.h"
#include "pager/slot_cache.h"
#include "pager/size_classes.h"

namespace epq::pager {
namespace {

// n_layer layers of n_expert experts in one size class (or two: odd layers in a second).
SizeClasses classes(int n_layer, int n_expert, bool two = false) {
  std::vector<LayerSlotShape> shapes(static_cast<size_t>(n_layer));
  for (int l = 0; l < n_layer; ++l) shapes[static_cast<size_t>(l)] = {n_expert, {4096, 4096, two && l % 2 ? 8192u : 4096u}};
  return size_classes(shapes);
}

TEST(SlotCache, HitsMissesPinsAndEmptySlotsFirst) {
  SlotCache c(classes(2, 8), {3}, make_eviction_policy("lru"));
  c.begin(0);
  EXPECT_EQ(c.lookup(5), -1);
  EXPECT_EQ(c.lookup(1), -1);
  EXPECT_EQ(c.place(5), 0);  // empty slots in order
  EXPECT_EQ(c.place(1), 1);
  EXPECT_EQ(c.slot(0).pins, 1);
  c.unpin_all();
  c.begin(1);
  EXPECT_EQ(c.lookup(5), -1);  // another layer's expert 5
  EXPECT_EQ(c.place(5), 2);
  c.unpin_all();
  c.begin(0);  // a new pass
  EXPECT_EQ(c.pass(), 1);
  EXPECT_EQ(c.lookup(1), 1);
  EXPECT_EQ(c.lookup(3), -1);
  EXPECT_EQ(c.place(3), 0);  // LRU among unpinned: layer 0 expert 5 (slot 0)
  EXPECT_EQ(c.place(4), 2);  // slot 1 is pinned by the hit
  EXPECT_EQ(c.place(6), -1);  // all three pinned now
  c.unpin(0);
  EXPECT_EQ(c.place(6), 0);
  const PagerStats& s = c.stats();
  EXPECT_EQ(s.requests, 5u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.evictions(), 3u);
  EXPECT_EQ(s.evictions_stale_left, 1u);   // (0, 5) of pass 0
  EXPECT_EQ(s.evictions_stale_right, 1u);  // (1, 5) of pass 0
  EXPECT_EQ(s.evictions_current_left, 1u);  // (0, 3), placed in this pass
}

TEST(SlotCache, EachSizeClassHasItsOwnSlots) {
  const SizeClasses cl = classes(2, 4, true);
  ASSERT_EQ(cl.classes.size(), 2u);
  SlotCache c(cl, {1, 2}, make_eviction_policy("lru"));
  c.begin(0);
  c.lookup(0);
  EXPECT_EQ(c.place(0), 0);
  c.unpin_all();
  c.begin(1);
  c.lookup(0);
  c.lookup(1);
  EXPECT_EQ(c.place(0), 1);
  EXPECT_EQ(c.place(1), 2);
  c.unpin_all();
  c.begin(1);  // new pass: the second class evicts within itself only
  c.lookup(2);
  EXPECT_EQ(c.slot(c.place(2)).cls, 1);
  EXPECT_EQ(c.slot(0).expert, 0);
}

TEST(SlotCache, LrfuKeepsTheFrequentExpertOverTheRecentOne) {
  for (const char* name : {"lru", "lrfu"}) {
    SlotCache c(classes(1, 8), {2}, make_eviction_policy(name));
    auto request = [&](int e) {
      c.unpin_all();
      c.begin(0);
      if (c.lookup(e) < 0) c.place(e);
    };
    for (int i = 0; i < 5; ++i) request(0);  // expert 0: five passes
    request(1);                             // expert 1: once, more recently
    request(2);                             // evicts one of them
    request(0);
    const bool kept = c.stats().hits == 5;  // four repeats of 0, then 0 again
    EXPECT_EQ(kept, std::string(name) == "lrfu") << name;
  }
}

TEST(SlotCache, LrfuDecaysOldRequests) {
  auto p = make_eviction_policy("lrfu");
  // Expert 0: 3 requests long ago; expert 1: 1 request now. Four half-lives later, 3/16 < 1.
  for (int i = 0; i < 3; ++i) p->requested(0, 0, {0, 0});
  p->requested(0, 1, {0, static_cast<int64_t>(4 * kLrfuHalfLife)});
  const EvictionContext now{0, static_cast<int64_t>(4 * kLrfuHalfLife)};
  EXPECT_LT(p->key({0, 1, 0, 0}, now), p->key({0, 2, 0, 1}, now));
  // Many half-lives on, scores are rescaled and still order correctly.
  const int64_t later = static_cast<int64_t>(2000 * kLrfuHalfLife);
  p->requested(0, 0, {0, later});
  p->requested(0, 0, {0, later});
  EXPECT_LT(p->key({0, 1, 0, 1}, {0, later}), p->key({0, 2, 0, 0}, {0, later}));
}

}  // namespace
}  // namespace epq::pager
