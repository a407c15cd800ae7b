#include "pager/uring_engine.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "pager/fault_injection.h"
#include "util/error.h"

namespace epq::pager {

UringEngine::UringEngine(const ShardFiles& files, int queue_depth, std::span<const IoRegion> regions, std::string* note)
    : files_(files), depth_(static_cast<unsigned>(std::max(1, queue_depth))) {
  const int rc = FaultInjection::from_environment().uring_refused() ? -EPERM : io_uring_queue_init(depth_, &ring_, 0);
  if (rc < 0) fail("io_uring is unavailable: {}", std::strerror(-rc));
  std::vector<iovec> iov;
  for (const IoRegion& r : regions) {
    for (size_t off = 0; off < r.size; off += kMaxRegistered) {
      const size_t n = std::min(kMaxRegistered, r.size - off);
      registered_.push_back({r.data + off, n});
      iov.push_back({r.data + off, n});
    }
  }
  const int reg = iov.empty() ? -EINVAL : io_uring_register_buffers(&ring_, iov.data(), static_cast<unsigned>(iov.size()));
  fixed_ = reg == 0;
  if (!fixed_ && note) *note = std::string("io_uring buffer registration refused (") + std::strerror(-reg) + "); using plain reads";
  std::vector<int> fds;
  for (uint32_t s = 0; s < files_.size(); ++s) fds.push_back(files_[s].fd());
  fixed_files_ = io_uring_register_files(&ring_, fds.data(), static_cast<unsigned>(fds.size())) == 0;
}

UringEngine::~UringEngine() {
  // Never leave reads writing into memory that is about to be freed.
  std::vector<ReadCompletion> drain;
  while (running_ > 0) reap(drain, true);
  io_uring_queue_exit(&ring_);
}

int UringEngine::buffer_index(const uint8_t* p) const {
  for (size_t i = 0; i < registered_.size(); ++i) {
    if (p >= registered_[i].data && p < registered_[i].data + registered_[i].size) return static_cast<int>(i);
  }
  fail("internal: read destination outside the registered arena");
}

void UringEngine::push_queued() {
  unsigned added = 0;
  while (!queued_.empty() && running_ < depth_) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) break;
    const ReadRequest& r = queued_.front();
    const int fd = fixed_files_ ? static_cast<int>(r.shard) : files_[r.shard].fd();
    if (fixed_) {
      io_uring_prep_read_fixed(sqe, fd, r.dest, r.length, r.offset, buffer_index(r.dest));
    } else {
      io_uring_prep_read(sqe, fd, r.dest, r.length, r.offset);
    }
    if (fixed_files_) io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE);
    io_uring_sqe_set_data64(sqe, r.tag);
    queued_.pop_front();
    ++running_;
    ++added;
  }
  if (added > 0) {
    const int rc = io_uring_submit(&ring_);
    if (rc < 0) fail("io_uring submit failed: {}", std::strerror(-rc));
  }
}

void UringEngine::submit(std::span<const ReadRequest> reads) {
  queued_.insert(queued_.end(), reads.begin(), reads.end());
  push_queued();
}

void UringEngine::reap(std::vector<ReadCompletion>& out, bool wait) {
  io_uring_cqe* cqe = nullptr;
  if (wait && running_ > 0) {
    int rc;
    do {
      rc = io_uring_wait_cqe(&ring_, &cqe);
    } while (rc == -EINTR);
    if (rc < 0) fail("io_uring wait failed: {}", std::strerror(-rc));
  }
  while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
    out.push_back({io_uring_cqe_get_data64(cqe), cqe->res});
    io_uring_cqe_seen(&ring_, cqe);
    --running_;
  }
  push_queued();
}

}  // namespace epq::pager
