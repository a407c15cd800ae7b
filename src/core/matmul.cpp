#include "core/matmul.h"

#include <algorithm>
#include <vector>

#include "quant/dot.h"
#include "util/error.h"

namespace epq {
namespace {

struct Chunk {
  int job;
  int64_t row_begin, row_end;
};

void run_chunk(const MatmulJob& j, const Chunk& c, quant::DotKernel kernel) {
  float results[quant::kMaxCols];
  for (int64_t r = c.row_begin; r < c.row_end; ++r) {
    const uint8_t* row = j.w->row(r);
    for (int64_t t0 = 0; t0 < j.n_tokens; t0 += quant::kMaxCols) {
      const int n = static_cast<int>(std::min<int64_t>(quant::kMaxCols, j.n_tokens - t0));
      kernel(j.w->cols, row, j.act + static_cast<size_t>(t0) * j.act_stride, j.act_stride, n, results);
      for (int k = 0; k < n; ++k) j.out[static_cast<size_t>(t0 + k) * j.out_stride + static_cast<size_t>(r)] = results[k];
    }
  }
}

}  // namespace

void run_matmuls(ThreadPool& pool, std::span<const MatmulJob> jobs) {
  const quant::KernelSet& kernels = quant::active_kernels();
  int64_t total_rows = 0;
  for (const MatmulJob& j : jobs) total_rows += j.w->rows;
  // Enough chunks to balance the threads, but each at least 16 rows to amortize dispatch.
  const int64_t target = std::max<int64_t>(16, total_rows / (static_cast<int64_t>(pool.size()) * 16));
  std::vector<Chunk> chunks;
  std::vector<quant::DotKernel> job_kernels;
  for (size_t i = 0; i < jobs.size(); ++i) {
    quant::DotKernel k = quant::dot_kernel(kernels, jobs[i].w->type);
    if (k == nullptr) fail("no kernel for weight type {}", quant::name(jobs[i].w->type));
    job_kernels.push_back(k);
    if (jobs[i].n_tokens == 0) continue;
    for (int64_t r = 0; r < jobs[i].w->rows; r += target) {
      chunks.push_back({static_cast<int>(i), r, std::min(jobs[i].w->rows, r + target)});
    }
  }
  pool.run(static_cast<int64_t>(chunks.size()), [&](int64_t task, int) {
    const Chunk& c = chunks[static_cast<size_t>(task)];
    run_chunk(jobs[static_cast<size_t>(c.job)], c, job_kernels[static_cast<size_t>(c.job)]);
  });
}

}  // namespace epq
