#include "util/buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "util/error.h"
#include "util/format.h"

namespace epq {

size_t Buffer::footprint(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

Buffer::Buffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* p = mmap(nullptr, footprint(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) fail("cannot allocate {}: {}", format_bytes(bytes), std::strerror(errno));
  data_ = static_cast<uint8_t*>(p);
}

Buffer::~Buffer() {
  if (data_ != nullptr) munmap(data_, footprint(size_));
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, footprint(size_));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace epq
