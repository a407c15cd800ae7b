#pragma once
// Offline replay of a routing trace through the pager's own slot bookkeeping (SlotCache)
// and eviction policies, with no file and no I/O: the hits, misses and bytes a paged run
// of the traced passes would see at a given arena, and, beside them, Belady's MIN under
// the same rules (per size class; the current layer's experts pinned; one request = the
// distinct experts of one layer in one pass): on each miss it evicts the unpinned expert
// whose next request is farthest away, which no policy that knows only the past can beat.
//
// A layer that needs more experts than its class has slots is served in waves, as the
// pager does: once the slots are all pinned, the experts taken so far are released. The
// pager releases them as their reads land, so with waves a paged run can differ from the
// replay; without waves (slots per class at least a layer's distinct experts) it agrees.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pager/eviction_policy.h"
#include "pager/pager_stats.h"
#include "pager/size_classes.h"
#include "runtime/routing_trace.h"

namespace epq::runtime {

inline constexpr const char* kBeladyName = "min";

// The size classes of the traced model, as the pager builds them.
pager::SizeClasses trace_size_classes(const TraceHeader& header);

// An arena of `total` slots divided among the classes as the memory plan divides an
// arena: the largest arena whose division has at most `total` slots. Throws an Error if
// `total` is below top-k per class or above the model's experts.
std::vector<int64_t> slots_for_total(const pager::SizeClasses& classes, int n_expert_used, int64_t total);

// Belady's MIN for this trace (a policy that ranks slots by their next request).
std::unique_ptr<pager::EvictionPolicy> make_belady_policy(const RoutingTrace& trace);

// The counters of a paged run of the trace: requests, hits, misses, evictions and
// bytes_read (reads and io_wait_ms stay 0). after_first_pass, if given, receives them as
// they stood after the first pass (a run's prompt). With `prefetch`, after each request
// the pager's predictor names the next layer's experts and those not in the arena are
// placed as the pager places them (prefetched, prefetch_used and prefetch_bytes count
// them), as if every prefetch landed before its layer: the most prefetch could give.
pager::PagerStats replay_trace(const RoutingTrace& trace, const pager::SizeClasses& classes, const std::vector<int64_t>& slots,
                               std::unique_ptr<pager::EvictionPolicy> policy, pager::PagerStats* after_first_pass = nullptr,
                               bool prefetch = false);

// How well the prefetch predictor (pager/next_layer_predictor.h) learns this trace, as
// the pager runs it: at each request it names as many experts of the next routed layer
// as the request has; `named` of the next request's `requested` experts were among them.
struct PredictorAccuracy {
  uint64_t predicted = 0, requested = 0, named = 0;
  double recall() const { return requested ? static_cast<double>(named) / static_cast<double>(requested) : 0.0; }
  double precision() const { return predicted ? static_cast<double>(named) / static_cast<double>(predicted) : 0.0; }
};
PredictorAccuracy measure_predictor(const RoutingTrace& trace);

}  // namespace epq::runtime
