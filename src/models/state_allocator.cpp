#include "models/state_allocator.h"

namespace epq::models {

Buffer StateAllocator::take(size_t bytes) {
  bytes_ += Buffer::footprint(bytes);
  return measuring_ || bytes == 0 ? Buffer() : Buffer(bytes);
}

QuantizedInput StateAllocator::input(int64_t max_tokens, int64_t max_cols) {
  bytes_ += QuantizedInput::bytes_needed(max_tokens, max_cols);
  return measuring_ ? QuantizedInput() : QuantizedInput(max_tokens, max_cols);
}

}  // namespace epq::models
