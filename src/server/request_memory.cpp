#include "server/request_memory.h"

#include <malloc.h>

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
  // The request's heap memory is free by now, but malloc keeps it (in one arena per
  // thread) unless asked to return it: the next request's grant must be real memory.
  malloc_trim(0);
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
