#pragma once
// The part of the RAM budget that requests being read and prepared (parsed, rendered
// through the chat template, tokenized) may use at once. A request reserves what its body
// will cost before reading it (or chunk by chunk, for chunked bodies) and gives it back
// once its prompt is tokens; a request that cannot get its share in time is refused with
// 503, so many large requests at once wait or fail instead of breaking the budget.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace epq::server {

class RequestMemory {
 public:
  explicit RequestMemory(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // Waits up to `patience` for `bytes` to be free; false if they never were (or bytes
  // exceeds the capacity).
  bool acquire(uint64_t bytes, std::chrono::milliseconds patience);
  void release(uint64_t bytes);
  uint64_t capacity() const { return capacity_; }
  uint64_t in_use() const;

 private:
  const uint64_t capacity_;
  uint64_t used_ = 0;
  mutable std::mutex mu_;
  std::condition_variable freed_;
};

// Bytes held on behalf of one request, given back when it goes out of scope.
class MemoryReservation {
 public:
  explicit MemoryReservation(RequestMemory& pool) : pool_(pool) {}
  ~MemoryReservation() { pool_.release(bytes_); }
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;

  // Adds `bytes`. If they are not free at once, gives back what it holds and waits up to
  // `patience` for the whole amount: requests that grow piece by piece (chunked bodies)
  // never hold parts while each waits for the others to finish, which would deadlock
  // them. False (holding nothing) if the whole amount was not free in time.
  bool grow(uint64_t bytes, std::chrono::milliseconds patience) {
    if (pool_.acquire(bytes, std::chrono::milliseconds(0))) {
      bytes_ += bytes;
      return true;
    }
    const uint64_t total = bytes_ + bytes;
    pool_.release(bytes_);
    bytes_ = 0;
    if (!pool_.acquire(total, patience)) return false;
    bytes_ = total;
    return true;
  }
  uint64_t bytes() const { return bytes_; }

 private:
  RequestMemory& pool_;
  uint64_t bytes_ = 0;
};

}  // namespace epq::server
