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

// Several sequences' forward passes that run as one step (runtime/batched_passes.h)
// multiply the same matrices: the model's own weights, and the experts that several of
// them chose. A thread that computes such a pass has a sharer, which runs its products
// together with the other passes', each matrix once for all their tokens: one read of
// each weight row for every pass. A kernel gives a column the same bits whatever
// columns share its call (quant/dot.h), so sharing never changes a number.
class MatmulSharer {
 public:
  virtual ~MatmulSharer() = default;
  virtual void run(ThreadPool& pool, std::span<const MatmulJob> jobs) = 0;
};
// Installs the calling thread's sharer (null: none) while it lives.
class SharingMatmuls {
 public:
  explicit SharingMatmuls(MatmulSharer* sharer);
  ~SharingMatmuls();
  SharingMatmuls(const SharingMatmuls&) = delete;
  SharingMatmuls& operator=(const SharingMatmuls&) = delete;

 private:
  MatmulSharer* previous_;
};
// The products of a forward pass: through the calling thread's sharer if it has one,
// else run_matmuls.
void run_shared_matmuls(ThreadPool& pool, std::span<const MatmulJob> jobs);

// The job that multiplies w with every token of `input` (quantized to w's format on
// first use): out[t * out_stride + r].
MatmulJob matmul_job(const Matrix& w, QuantizedInput& input, float* out, size_t out_stride);

}  // namespace epq
