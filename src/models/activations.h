#pragma once
// The residual stream of a batch and the buffers every block of a layer shares: the
// normalised block input (as floats and in each weight format's activation encoding) and
// the block's output, which the architecture adds back into the stream.
#include <cstdint>
#include <vector>

#include "core/quantized_input.h"
#include "core/thread_pool.h"
#include "models/state_allocator.h"

namespace epq::models {

struct Activations {
  Activations(StateAllocator& alloc, int64_t max_tokens, int64_t n_embd);

  // xn = rms_norm(x, weight) per token, and input = xn, for the next block.
  void norm_input(ThreadPool& pool, const float* weight, float eps, int64_t n_tokens);
  // out = 0 over n_tokens rows, for blocks that add into it.
  void clear_output(int64_t n_tokens);
  // x += out over n_tokens rows.
  void add_output(int64_t n_tokens);

  int64_t n_embd;
  Buffer x;    // [T][n_embd] the residual stream
  Buffer xn;   // [T][n_embd] the current block's normalised input
  Buffer out;  // [T][n_embd] the current block's output
  QuantizedInput input;  // xn, quantized once per weight format
  std::vector<int32_t> positions;  // absolute position of each token of the batch
};

}  // namespace epq::models
