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

// Rows in a tile: their weights (~36 KiB of Q4_K at 2048 columns) stay in L2 while every
// group of kMaxCols tokens passes over them, and each group's activations stay in L1
// across the tile's rows. (Row-by-row over all tokens would stream every token's
// activations from L2 once per row, which costs more than the arithmetic.)
constexpr int64_t kRowTile = 32;

void run_chunk(const MatmulJob& j, const Chunk& c, quant::DotKernel kernel) {
  // Tokens in groups of at most kMaxCols, as even as possible (9 tokens: 5 + 4, not
  // 8 + 1): narrow groups decode each weight block for too few columns.
  const int64_t groups = (j.n_tokens + quant::kMaxCols - 1) / quant::kMaxCols;
  for (int64_t r0 = c.row_begin; r0 < c.row_end; r0 += kRowTile) {
    const int64_t rows = std::min(c.row_end, r0 + kRowTile) - r0;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t t0 = g * j.n_tokens / groups;
      const int n = static_cast<int>((g + 1) * j.n_tokens / groups - t0);
      kernel(j.w->cols, j.w->row(r0), j.w->row_bytes, rows, j.act + static_cast<size_t>(t0) * j.act_stride, j.act_stride, n,
             j.out + static_cast<size_t>(t0) * j.out_stride + static_cast<size_t>(r0), j.out_stride);
    }
  }
}

}  // namespace

void run_matmuls(ThreadPool& pool, std::span<const MatmulJob> jobs) {
  const quant::KernelSet& kernels = quant::active_kernels();
  int64_t total_rows = 0;
  for (const MatmulJob& j : jobs) total_rows += j.w->rows;
  // Enough chunks to balance the threads, but each at least 16 rows to amortize dispatch,
  // and a multiple of sixteen, as the groups of the four- and sixteen-row layouts are.
  const int64_t target = (std::max<int64_t>(16, total_rows / (static_cast<int64_t>(pool.size()) * 16)) + 15) / 16 * 16;
  std::vector<Chunk> chunks;
  std::vector<quant::DotKernel> job_kernels;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Matrix& w = *jobs[i].w;
    quant::DotKernel k = w.rows4 ? quant::dot_kernel_rows4(kernels, w.type) : quant::dot_kernel(kernels, w.type);
    if (k == nullptr) fail("no kernel for weight type {}{}", quant::name(w.type), w.rows4 ? " in the four-row layout" : "");
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

namespace {
thread_local MatmulSharer* t_sharer = nullptr;
}

SharingMatmuls::SharingMatmuls(MatmulSharer* sharer) : previous_(t_sharer) { t_sharer = sharer; }
SharingMatmuls::~SharingMatmuls() { t_sharer = previous_; }

void run_shared_matmuls(ThreadPool& pool, std::span<const MatmulJob> jobs) {
  if (t_sharer) {
    t_sharer->run(pool, jobs);
  } else {
    run_matmuls(pool, jobs);
  }
}

MatmulJob matmul_job(const Matrix& w, QuantizedInput& input, float* out, size_t out_stride) {
  const quant::ActFormat f = quant::activation_format(w.type);
  return {&w, input.data(f), input.stride(f), input.n_tokens(), out, out_stride};
}

}  // namespace epq
