#pragma once
// A page-aligned anonymous memory region from mmap. Large allocations go through this
// type so the memory ledger knows their exact size; pages are touched (committed) at
// creation so the process's peak is reached up front, not in the middle of a run, and
// regions of 2 MiB or more ask for transparent huge pages.
#include <cstddef>
#include <cstdint>

namespace epq {

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);  // zero-filled and committed; throws Error on failure
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const { return reinterpret_cast<T*>(data_); }

  // Bytes that an allocation of `bytes` occupies (rounded up to whole pages).
  static size_t footprint(size_t bytes);

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace epq
