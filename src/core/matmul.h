#pragma once
// Matrix products on the thread pool. A job multiplies one weight matrix with the
// activations of n_tokens tokens: out[t * out_stride + r] = dot(w.row(r), act_t).
// Several jobs run as one parallel loop (e.g. every expert's gate and up projections),
// split into row chunks; each chunk reads its weight rows once for up to kMaxCols tokens.
// A row's result depends only on its row and its tokens, never on the thread count.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/matrix.h"
#include "core/quantized_input.h"
#include "core/thread_pool.h"

namespace epq {

struct MatmulJob {
  const Matrix* w;
  const uint8_t* act;  // token t's activation row at act + t * act_stride, in w's format
  size_t act_stride;
  int64_t n_tokens;
  float* out;
  size_t out_stride;  // floats between consecutive tokens' outputs
};

void run_matmuls(ThreadPool& pool, std::span<const MatmulJob> jobs);

// The job that multiplies w with every token of `input` (quantized to w's format on
// first use): out[t * out_stride + r].
MatmulJob matmul_job(const Matrix& w, QuantizedInput& input, float* out, size_t out_stride);

}  // namespace epq
