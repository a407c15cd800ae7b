#include "core/quantized_input.h"

#include "core/thread_pool.h"
#include "util/error.h"

namespace epq {

size_t QuantizedInput::bytes_needed(int64_t max_tokens, int64_t max_cols) {
  size_t total = 0;
  for (int f = 0; f < quant::kActFormatCount; ++f) {
    total += Buffer::footprint(quant::activation_bytes(static_cast<quant::ActFormat>(f), max_cols) * static_cast<size_t>(max_tokens));
  }
  return total;
}

QuantizedInput::QuantizedInput(int64_t max_tokens, int64_t max_cols) {
  for (int f = 0; f < quant::kActFormatCount; ++f) {
    buffers_[f] = Buffer(quant::activation_bytes(static_cast<quant::ActFormat>(f), max_cols) * static_cast<size_t>(max_tokens));
  }
}

void QuantizedInput::set(ThreadPool& pool, const float* x, int64_t n_tokens, int64_t n_cols, size_t x_stride) {
  pool_ = &pool;
  x_ = x;
  n_tokens_ = n_tokens;
  n_cols_ = n_cols;
  x_stride_ = x_stride;
  ready_.fill(false);
}

const uint8_t* QuantizedInput::data(quant::ActFormat f) {
  const int i = static_cast<int>(f);
  if (!ready_[i]) {
    const size_t row = stride(f);
    if (row * static_cast<size_t>(n_tokens_) > buffers_[i].size()) fail("internal: activation buffer too small");
    // A prompt's rows on every thread: one at a time, they took ~1.5% of a 691-token
    // prompt's time with the other thread idle (docs/PERFORMANCE.md, stop 58).
    pool_->run(n_tokens_, [&](int64_t t, int) {
      quant::quantize_activation(f, x_ + static_cast<size_t>(t) * x_stride_, buffers_[i].data() + static_cast<size_t>(t) * row, n_cols_);
    });
    ready_[i] = true;
  }
  return buffers_[i].data();
}

}  // namespace epq
