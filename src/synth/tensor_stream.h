#pragma once
// The part of `epq synth` that every architecture shares: a plan of tensors (name, type,
// shape and how its values are drawn), generated row by row from (seed, tensor, row),
// quantized in bounded chunks on a thread pool and streamed into a gguf::Writer. The
// bytes depend only on the options and the plan, never on the thread count.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "quant/types.h"
#include "synth/options.h"

namespace epq::synth {

// How the values of a tensor are drawn.
enum class Init {
  kGaussian,   // N(0, scale^2), plus offset
  kNormGain,   // 1 + scale * N(0, 1): RMSNorm weights
  kEmbedding,  // N(0, 1), plus the popularity direction when zipf > 0
  kRouter,     // N(0, scale^2), plus a per-expert popularity offset when zipf > 0
  kNegExp,     // -exp(offset + scale * N(0, 1)): a negative rate, e.g. ssm_a = -exp(A_log)
};

struct TensorPlan {
  std::string name;
  quant::Type type;
  std::vector<int64_t> dims;  // ne0 (the row length) first
  Init init;
  float scale;
  int layer = -1;  // the layer a router belongs to (for the popularity skew)
  float offset = 0;
};

struct Progress {
  int tensor = 0;  // 1-based index of the tensor being written
  int n_tensors = 0;
  const char* name = "";
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
};

using ProgressFn = std::function<void(const Progress&)>;

// Declares the plan's tensors in w (whose metadata is already set), writes their data in
// plan order and finishes the file. Options supply the seed, zipf, shape and threads.
void stream_tensors(gguf::Writer& w, const Options& options, const std::vector<TensorPlan>& plan,
                    const ProgressFn& on_progress);

}  // namespace epq::synth
