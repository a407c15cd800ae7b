#include "pager/io_engine.h"

#include <algorithm>

#include "pager/pread_engine.h"
#include "pager/uring_engine.h"
#include "util/error.h"

namespace epq::pager {

uint64_t IoEngine::memory_bytes(const IoOptions& o) {
  // io_uring: SQ/CQ rings and the SQE array, a few hundred bytes per entry; pread: thread stacks.
  const uint64_t ring = uint64_t{static_cast<unsigned>(o.queue_depth)} * 256 + 64 * 1024;
  const uint64_t threads = uint64_t{PreadEngine::kThreads} * PreadEngine::kStackBytes;
  return ring + threads;  // either engine may end up in use (io_uring falls back to pread)
}

std::unique_ptr<IoEngine> make_io_engine(const ShardFiles& files, const IoOptions& options, std::span<const IoRegion> regions,
                                         std::string* note) {
  if (options.backend == "pread") return std::make_unique<PreadEngine>(files, options.queue_depth);
  if (options.backend != "uring") fail("--io must be 'uring' or 'pread', got '{}'", options.backend);
  try {
    return std::make_unique<UringEngine>(files, options.queue_depth, regions, note);
  } catch (const Error& e) {
    if (note) *note = std::string(e.what()) + "; falling back to pread threads";
    return std::make_unique<PreadEngine>(files, options.queue_depth);
  }
}

}  // namespace epq::pager
