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
#include <memory>
#include <string>
#include <vector>

#include "models/expert_source.h"
#include "pager/eviction_policy.h"
#include "pager/io_engine.h"
#include "pager/model_file.h"
#include "pager/pager_stats.h"
#include "pager/size_classes.h"
#include "pager/slot_cache.h"
#include "util/buffer.h"

namespace epq::pager {

struct PagerOptions {
  std::vector<int64_t> slots_per_class;  // one count per size class
  std::string policy = "lrfu";
  IoOptions io;
};

class Pager : public models::ExpertSource {
 public:
  Pager(const std::string& model_path, std::vector<models::ExpertLayout> layouts, const PagerOptions& options);
  ~Pager() override;

  void begin(int layer, std::span<const int> experts) override;
  bool next(std::vector<models::ReadyExpert>& ready) override;

  const PagerStats& stats() const { return cache_.stats(); }
  const SizeClasses& classes() const { return classes_; }
  const std::vector<int64_t>& slots_per_class() const { return slots_per_class_; }
  uint64_t arena_bytes() const;
  const char* io_name() const { return io_->name(); }
  const ModelFile& file() const { return file_; }
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
    uint64_t part_offset[3] = {};  // where each matrix starts within the slot
  };
  struct Piece {
    int slot;
    uint64_t offset;
    uint32_t needed;  // bytes that must arrive (less than the length only at end of file)
  };

  // Pins the slot to (layer, expert) and queues its reads; submit_loads() sends them.
  void load(int slot, int layer, int expert);
  void submit_loads();
  void complete(const ReadCompletion& c);
  models::ReadyExpert view(int request_index, int slot) const;

  ModelFile file_;
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
