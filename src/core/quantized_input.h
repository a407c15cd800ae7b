#pragma once
// The input of one or more matrix products for a batch of tokens, kept as floats and,
// on first request, in each activation format that the reading weights need. Every
// matrix that reads the same input shares one quantization per token; a batch's tokens
// are quantized in parallel on the pool given to set().
#include <array>
#include <cstddef>
#include <cstdint>

#include "quant/activation.h"
#include "util/buffer.h"

namespace epq {

class ThreadPool;

class QuantizedInput {
 public:
  QuantizedInput() = default;
  // Capacity: up to max_tokens rows of up to max_cols elements (a multiple of 256).
  QuantizedInput(int64_t max_tokens, int64_t max_cols);
  static size_t bytes_needed(int64_t max_tokens, int64_t max_cols);

  // Points at n_tokens rows of n_cols floats, x_stride floats apart; forgets old formats.
  // data() quantizes on pool, which must outlive the next set().
  void set(ThreadPool& pool, const float* x, int64_t n_tokens, int64_t n_cols, size_t x_stride);
  // Row t of the input in format f is at data(f) + t * stride(f).
  const uint8_t* data(quant::ActFormat f);
  size_t stride(quant::ActFormat f) const { return quant::activation_bytes(f, n_cols_); }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t n_cols() const { return n_cols_; }

 private:
  Buffer buffers_[quant::kActFormatCount];
  std::array<bool, quant::kActFormatCount> ready_{};
  ThreadPool* pool_ = nullptr;
  const float* x_ = nullptr;
  int64_t n_tokens_ = 0, n_cols_ = 0;
  size_t x_stride_ = 0;
};

}  // namespace epq
