#pragma once
// Every buffer of a forward state (KV cache, recurrent state, scratch) is taken from a
// StateAllocator when the state is built. A measuring allocator hands out empty buffers
// and only adds up their footprints, so the memory plan counts exactly what building the
// same state for real allocates, without any block knowing about the plan.
#include <cstddef>
#include <cstdint>

#include "core/quantized_input.h"
#include "util/buffer.h"

namespace epq::models {

class StateAllocator {
 public:
  static StateAllocator measuring() { return StateAllocator(true); }
  static StateAllocator allocating() { return StateAllocator(false); }

  // A zeroed buffer of `bytes` (empty when measuring); its footprint is counted.
  Buffer take(size_t bytes);
  // Input rows for up to max_tokens tokens of up to max_cols elements (empty when measuring).
  QuantizedInput input(int64_t max_tokens, int64_t max_cols);
  bool is_measuring() const { return measuring_; }
  uint64_t bytes() const { return bytes_; }

 private:
  explicit StateAllocator(bool measuring) : measuring_(measuring) {}
  bool measuring_;
  uint64_t bytes_ = 0;
};

}  // namespace epq::models
