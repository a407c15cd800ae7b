#pragma once
// Asynchronous reads from the model's files into the arena. The main path is io_uring with
// the arena registered as fixed buffers; a pool of threads doing pread is the fallback
// (or forced with --io pread). Engines complete reads in any order; callers match them
// by tag.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pager/shard_files.h"

namespace epq::pager {

struct ReadRequest {
  uint32_t shard;   // which of the model's files
  uint64_t offset;  // aligned to kDirectAlign
  uint32_t length;  // aligned to kDirectAlign
  uint8_t* dest;    // aligned to kDirectAlign, inside a registered region
  uint64_t tag;
};

struct ReadCompletion {
  uint64_t tag;
  int64_t result;  // bytes read, or -errno
};

struct IoOptions {
  std::string backend = "uring";  // "uring" or "pread"
  int queue_depth = 64;           // reads in flight at once
  uint32_t max_read_bytes = 1 << 20;  // larger reads are split into pieces of this size
  bool force_buffered = false;        // skip O_DIRECT (tests of the fallback)
};

class IoEngine {
 public:
  virtual ~IoEngine() = default;
  virtual const char* name() const = 0;
  // Queues reads; they start as soon as the queue depth allows.
  virtual void submit(std::span<const ReadRequest> reads) = 0;
  // Appends completions to `out`; blocks until at least one arrives if `wait` is set.
  virtual void reap(std::vector<ReadCompletion>& out, bool wait) = 0;
  virtual size_t in_flight() const = 0;
  // Memory the engine itself holds (rings, thread stacks), for the ledger.
  static uint64_t memory_bytes(const IoOptions& options);
};

// Regions reads may land in (the arena), registered with io_uring when it is used.
struct IoRegion {
  uint8_t* data;
  size_t size;
};

// Creates the engine `options.backend` names; io_uring falls back to pread (with a
// logged reason in `note`) when the kernel refuses it.
std::unique_ptr<IoEngine> make_io_engine(const ShardFiles& files, const IoOptions& options, std::span<const IoRegion> regions,
                                         std::string* note);

}  // namespace epq::pager
