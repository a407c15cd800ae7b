#pragma once
// IoEngine on io_uring. The arena is registered as fixed buffers (read_fixed avoids
// pinning pages per request) and the model's files as fixed files; whatever the kernel
// refuses to register is used plainly.
#include <liburing.h>

#include <deque>

#include "pager/io_engine.h"

namespace epq::pager {

class UringEngine : public IoEngine {
 public:
  // Throws Error if io_uring cannot be set up (the caller falls back to pread).
  UringEngine(const ShardFiles& files, int queue_depth, std::span<const IoRegion> regions, std::string* note);
  ~UringEngine() override;
  const char* name() const override { return fixed_ ? "io_uring (fixed buffers)" : "io_uring"; }
  void submit(std::span<const ReadRequest> reads) override;
  void reap(std::vector<ReadCompletion>& out, bool wait) override;
  size_t in_flight() const override { return queued_.size() + running_; }

  static constexpr size_t kMaxRegistered = size_t{1} << 30;  // the kernel's limit per fixed buffer

 private:
  void push_queued();
  int buffer_index(const uint8_t* p) const;

  io_uring ring_{};
  const ShardFiles& files_;
  unsigned depth_;
  bool fixed_ = false;        // buffers registered
  bool fixed_files_ = false;  // files registered, by shard number
  std::vector<IoRegion> registered_;  // chunks of at most kMaxRegistered bytes
  std::deque<ReadRequest> queued_;
  size_t running_ = 0;
};

}  // namespace epq::pager
