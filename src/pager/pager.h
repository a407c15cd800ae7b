#pragma once
// The expert pager: routed experts live in the model file and are read on demand, with
// direct I/O, into a fixed arena of slots (one slot = one expert's gate, up and down).
//
// For each layer, begin() looks up the requested experts: hits are pinned and ready at
// once; misses get a slot (an empty one, else the policy's victim among unpinned slots
// of the layer's size class) and all their reads are submitted together. next() hands
// out experts as their reads land, so computing one expert overlaps reading the others.
// When a layer needs more experts than its class has slots (a large prompt batch at a
// small budget), the rest wait until delivered experts are released, and are read then.
// Which expert each slot holds, pins and victims are decided by a SlotCache (the same
// object `epq replay` drives without I/O); the pager moves the bytes.
//
// An expert's matrices that quant::use_rows4_layout names are rearranged in its slot into
// the four-row layout (quant/rows4_layout.h), when it is handed out the
// kUsesBeforeRearranging-th time since it was read. The rearranging costs what six to
// eight uses gain (0.26-0.33 ms for a 2.65 MB IQ4_NL expert not in the cache, against
// 15-17 us per MB and use, on Zen 5), so only experts that stay in the arena and keep
// being used are worth it; in an arena that thrashes, few ever are.
//
// Prefetch (PagerOptions::prefetch; the engine turns on `gate` by default): at each request a predictor names the
// experts the next routed layer will likely ask for: the stale gate (`gate`: the next
// layer's router applied to the current layer's input, told through predicted()) or the
// history of requests (`history`: a NextLayerPredictor). Once every demand read of
// the current layer has landed (the disk would idle while the CPU computes), the named
// experts not in the arena are read ahead, each into the slot a miss would get (an empty
// one, else the policy's next victim), whole experts only, with at most
// kReadAheadBytes of them in flight, so a demand read that arrives queues behind at most
// that much. A prefetched slot is pinned until its reads land; a request that finds it
// counts a hit (and a prefetch_used). Demand reads are always submitted first.
//
// Failed reads: a read cut short before the end of the file is sent again for the rest.
// A read that fails (an I/O error, or the end of a file that was truncated) makes next()
// throw its error (ModelFile::read_failed), once every read in flight has landed and the
// slots whose expert did not arrive whole are forgotten and all pins dropped: the next
// request reads those experts again, and never sees a slot it cannot trust. A request
// abandoned midway for any other reason (an exception in the caller) is settled the same
// way at the next begin().
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/expert_source.h"
#include "pager/eviction_policy.h"
#include "pager/fault_injection.h"
#include "pager/io_engine.h"
#include "pager/next_layer_predictor.h"
#include "pager/pager_stats.h"
#include "pager/shard_files.h"
#include "pager/size_classes.h"
#include "pager/slot_cache.h"
#include "util/buffer.h"

namespace epq::pager {

enum class Prefetch { kOff, kStaleGate, kHistory };
// "off", "gate", "history", in that order.
const std::vector<std::string>& prefetch_names();
// One of prefetch_names(); throws an Error naming the choices otherwise.
Prefetch parse_prefetch(const std::string& name);

struct PagerOptions {
  std::vector<int64_t> slots_per_class;  // one count per size class
  std::string policy = "lrfu";
  IoOptions io;
  Prefetch prefetch = Prefetch::kOff;
};

// Uses after which an expert is rearranged into the four-row layout (see the header).
inline constexpr int kUsesBeforeRearranging = 8;

// Prefetch reads in flight at most (about 2 ms of a 2 GB/s disk), beyond one expert.
inline constexpr uint64_t kReadAheadBytes = 4 << 20;

class Pager : public models::ExpertSource {
 public:
  // shard_paths: the model's files (gguf::File::shard_paths()).
  Pager(const std::vector<std::string>& shard_paths, std::vector<models::ExpertLayout> layouts, const PagerOptions& options);
  ~Pager() override;

  bool wants_prediction() const override { return prefetch_ == Prefetch::kStaleGate; }
  void predicted(int next_layer, std::span<const int> experts) override;
  void begin(int layer, std::span<const int> experts) override;
  bool next(std::vector<models::ReadyExpert>& ready) override;

  const PagerStats& stats() const { return cache_.stats(); }
  const SizeClasses& classes() const { return classes_; }
  const std::vector<int64_t>& slots_per_class() const { return slots_per_class_; }
  uint64_t arena_bytes() const;
  const char* io_name() const { return io_->name(); }
  const ShardFiles& files() const { return files_; }
  const EvictionPolicy& policy() const { return cache_.policy(); }
  // Notes for the log: buffered fallback, io_uring fallback.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  // The bytes of a slot; which expert it holds, its pins and its uses live in cache_.
  struct Slot {
    int cls;
    uint8_t* data;
    bool ready = false;  // every read of its expert has landed
    int reads_left = 0;
    bool ahead = false;      // read ahead of a request, and not yet requested
    bool ahead_pin = false;  // pinned by the prefetch until its reads land
    bool failed = false;     // a read of its expert failed: never ready, forgotten by settle()
    int deliveries = 0;      // times handed out since it was read, up to kUsesBeforeRearranging
    // Rearranged into the four-row layout: arrange() runs as deliveries reaches the limit.
    bool arranged() const { return deliveries == kUsesBeforeRearranging; }
    uint64_t part_offset[3] = {};  // where each matrix starts within the slot
  };
  struct Piece {
    int slot;
    uint32_t shard;
    uint64_t offset;
    uint32_t needed;  // bytes that must arrive (less than the length only at end of file)
    uint32_t length;
    bool ahead;  // a prefetch read
    uint8_t* dest;
    uint32_t done = 0;  // bytes landed so far: a read cut short before the end of the file is sent again for the rest
  };
  struct FailedRead {
    uint32_t shard;
    uint64_t offset;
    size_t needed;
    long result;  // bytes read, or -errno
  };

  // Pins the slot to (layer, expert) and queues its reads; submit_loads() sends them.
  void load(int slot, int layer, int expert, bool ahead = false);
  void submit_loads();
  // Gives experts that waited for a slot one, now that delivered experts are released.
  void place_waiting();
  // Reads predicted experts ahead, if no demand read is in flight (see the header).
  void read_ahead();
  void complete(const ReadCompletion& c);
  // The part of a piece's read that has not landed yet.
  ReadRequest unread_part(uint64_t tag) const;
  // Makes the arena consistent after a request was abandoned midway (a failed read, or an
  // exception while computing): waits for every read in flight, forgets the experts whose
  // slots did not fill completely (a later request reads them again) and unpins every slot.
  void settle();
  // After a failed read: settle(), then throws the read's error.
  [[noreturn]] void fail_request();
  // Rearranges the slot's matrices that quant::use_rows4_layout names into the four-row
  // layout (see the header); view() marks them so.
  void arrange(int slot);
  models::ReadyExpert view(int request_index, int slot) const;

  ShardFiles files_;
  std::vector<models::ExpertLayout> layouts_;
  SizeClasses classes_;
  std::vector<int64_t> slots_per_class_;
  SlotCache cache_;
  std::vector<Buffer> arena_;
  std::vector<Slot> slots_;
  std::unique_ptr<IoEngine> io_;
  IoOptions io_options_;
  std::vector<Piece> pieces_;
  std::vector<ReadRequest> to_submit_;
  std::vector<uint64_t> free_pieces_;
  std::vector<std::string> notes_;
  FaultInjection faults_ = FaultInjection::from_environment();  // test-only (EPQ_FAULT_INJECT)
  std::optional<FailedRead> failed_read_;  // the first read of the current request that failed
  Prefetch prefetch_;
  std::unique_ptr<NextLayerPredictor> predictor_;  // kHistory
  int told_layer_ = -1;        // kStaleGate: the layer predicted() was last told about
  std::vector<int> told_;      // and its experts
  int ahead_layer_ = -1;       // the layer the predictions are for
  std::vector<int> ahead_;     // its predicted experts, most likely first
  size_t ahead_next_ = 0;      // the next prediction to read
  uint64_t ahead_in_flight_ = 0;   // bytes of prefetch reads in flight
  size_t demand_in_flight_ = 0;    // demand reads in flight

  // The current request.
  std::vector<int> request_;           // expert ids, as given to begin()
  std::vector<int> request_slot_;      // slot per request entry, -1 while waiting for one
  std::vector<char> delivered_;        // per request entry
  std::vector<int> waiting_;           // request entries without a slot yet
  std::vector<int> held_;              // slots delivered by the last next(), pinned
  size_t n_delivered_ = 0;
  std::vector<ReadCompletion> completions_;
};

}  // namespace epq::pager
