#include "server/request_memory.h"

namespace epq::server {

bool RequestMemory::acquire(uint64_t bytes, std::chrono::milliseconds patience) {
  if (bytes > capacity_) return false;
  std::unique_lock lock(mu_);
  if (!freed_.wait_for(lock, patience, [&] { return capacity_ - used_ >= bytes; })) return false;
  used_ += bytes;
  return true;
}

void RequestMemory::release(uint64_t bytes) {
  if (bytes == 0) return;
  {
    std::lock_guard lock(mu_);
    used_ -= bytes;
  }
  freed_.notify_all();
}

uint64_t RequestMemory::in_use() const {
  std::lock_guard lock(mu_);
  return used_;
}

}  // namespace epq::server
