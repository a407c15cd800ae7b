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

// Writes an architecture's file: checks the options, sets the metadata, declares the
// planned tensors and streams their data in plan order. Options supply the seed, zipf,
// shape and threads.
using PlanFn = std::vector<TensorPlan> (*)(const Options&);
using MetadataFn = void (*)(gguf::Writer&, const Options&);
void write_model(const Options& options, const std::string& path, PlanFn plan_tensors, MetadataFn set_metadata,
                 const ProgressFn& on_progress);

}  // namespace epq::synth
