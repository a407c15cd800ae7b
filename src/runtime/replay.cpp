#include "runtime/replay.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "pager/next_layer_predictor.h"
#include "pager/slot_cache.h"
#include "runtime/memory_plan.h"
#include "util/error.h"

namespace epq::runtime {
namespace {

// Calls f(pass, layer record) for every request in the order the pager sees them, with
// the pass numbered as SlotCache numbers it.
template <typename F>
void for_each_request(const RoutingTrace& trace, F&& f) {
  int64_t pass = 0;
  int previous = -1;
  for (const TracePass& p : trace.passes) {
    for (const TraceLayer& l : p.layers) {
      if (l.layer <= previous) ++pass;
      previous = l.layer;
      f(pass, l);
    }
  }
}

class Belady : public pager::EvictionPolicy {
 public:
  explicit Belady(const RoutingTrace& trace) : n_layer_(trace.header.n_layer), n_expert_(trace.header.n_expert) {
    uses_.resize(static_cast<size_t>(n_layer_) * static_cast<size_t>(n_expert_));
    for_each_request(trace, [&](int64_t pass, const TraceLayer& l) {
      for (int e : l.distinct()) uses_[index(l.layer, e)].push_back(time(pass, l.layer));
    });
  }
  const char* name() const override { return kBeladyName; }
  pager::VictimKey key(const pager::SlotUse& s, const pager::EvictionContext& c) const override {
    const std::vector<int64_t>& uses = uses_[index(s.layer, s.expert)];
    const auto next = std::upper_bound(uses.begin(), uses.end(), time(c.pass, c.layer));
    const int64_t distance = next == uses.end() ? std::numeric_limits<int64_t>::max() : *next;
    return {-distance, 0, 0, s.last_use};  // the farthest next request first, never-again before all
  }

 private:
  size_t index(int layer, int expert) const { return static_cast<size_t>(layer) * static_cast<size_t>(n_expert_) + static_cast<size_t>(expert); }
  int64_t time(int64_t pass, int layer) const { return pass * n_layer_ + layer; }
  int n_layer_, n_expert_;
  std::vector<std::vector<int64_t>> uses_;  // per (layer, expert): ascending request times
};

}  // namespace

pager::SizeClasses trace_size_classes(const TraceHeader& header) { return pager::size_classes(header.layers); }

std::vector<int64_t> slots_for_total(const pager::SizeClasses& classes, int k, int64_t total) {
  int64_t minimum = 0, all = 0;
  uint64_t max_bytes = 0;
  for (const auto& c : classes.classes) {
    minimum += std::min<int64_t>(k, static_cast<int64_t>(c.total_experts()));
    all += static_cast<int64_t>(c.total_experts());
    max_bytes = std::max(max_bytes, c.slot_bytes);
  }
  if (total < minimum) fail("--slots {} is below the minimum of {} ({} per size class, the experts of one token)", total, minimum, k);
  if (total > all) fail("--slots {} is more than the {} experts of the traced model", total, all);
  auto count = [&](uint64_t arena) {
    int64_t n = 0;
    for (int64_t s : divide_arena(classes, k, arena)) n += s;
    return n;
  };
  // The largest arena whose division has at most `total` slots (the count never falls as
  // the arena grows; a single class gets exactly `total`).
  uint64_t lo = 0, hi = static_cast<uint64_t>(total + 1) * max_bytes;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    if (count(mid) <= total) lo = mid;
    else hi = mid - 1;
  }
  return divide_arena(classes, k, lo);
}

std::unique_ptr<pager::EvictionPolicy> make_belady_policy(const RoutingTrace& trace) { return std::make_unique<Belady>(trace); }

pager::PagerStats replay_trace(const RoutingTrace& trace, const pager::SizeClasses& classes, const std::vector<int64_t>& slots,
                               std::unique_ptr<pager::EvictionPolicy> policy, pager::PagerStats* after_first_pass, bool prefetch) {
  pager::SlotCache cache(classes, slots, std::move(policy));
  std::optional<pager::NextLayerPredictor> predictor;
  if (prefetch) predictor.emplace(classes);
  std::vector<char> ahead(cache.n_slots(), 0);  // per slot: prefetched and not yet requested
  std::vector<int> misses, predicted;
  int64_t last_pass = 0;
  for_each_request(trace, [&](int64_t pass, const TraceLayer& l) {
    if (pass == 1 && last_pass == 0 && after_first_pass) *after_first_pass = cache.stats();
    last_pass = pass;
    cache.unpin_all();  // the previous request was delivered in full
    cache.begin(l.layer);
    misses.clear();
    const std::vector<int> experts = l.distinct();
    for (int e : experts) {
      const int s = cache.lookup(e);
      if (s < 0) {
        misses.push_back(e);
      } else if (ahead[static_cast<size_t>(s)]) {
        ahead[static_cast<size_t>(s)] = 0;
        ++cache.stats().prefetch_used;
      }
    }
    for (int e : misses) {
      int s = cache.place(e);
      if (s < 0) {
        cache.unpin_all();  // a wave: what was taken so far is computed and released
        s = cache.place(e);
      }
      ahead[static_cast<size_t>(s)] = 0;
      cache.stats().bytes_read += trace.header.read_bytes(l.layer, e);
    }
    if (!predictor) return;
    // As the pager does once the request's reads have landed, but with no limit on time.
    predictor->observe(l.layer, experts);
    predictor->predict(l.layer, experts, experts.size(), predicted);
    const int next = predictor->next_layer(l.layer);
    for (int e : predicted) {
      if (cache.holds(next, e)) continue;
      const int s = cache.place_ahead(next, e);
      if (s < 0) break;
      ahead[static_cast<size_t>(s)] = 1;
      ++cache.stats().prefetched;
      cache.stats().prefetch_bytes += trace.header.read_bytes(next, e);
      cache.stats().bytes_read += trace.header.read_bytes(next, e);
    }
  });
  return cache.stats();
}

PredictorAccuracy measure_predictor(const RoutingTrace& trace) {
  pager::NextLayerPredictor predictor(trace_size_classes(trace.header));
  PredictorAccuracy a;
  std::vector<int> predicted;
  int predicted_for = -1;
  for_each_request(trace, [&](int64_t, const TraceLayer& l) {
    const std::vector<int> experts = l.distinct();
    if (l.layer == predicted_for) {
      a.predicted += predicted.size();
      a.requested += experts.size();
      for (int e : experts) a.named += std::find(predicted.begin(), predicted.end(), e) != predicted.end();
    }
    predictor.observe(l.layer, experts);
    predictor.predict(l.layer, experts, experts.size(), predicted);
    predicted_for = predictor.next_layer(l.layer);
  });
  return a;
}

}  // namespace epq::runtime
