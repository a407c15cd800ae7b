#include "synth/tensor_stream.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/thread_pool.h"
#include "quant/reference.h"
#include "synth/random.h"

namespace epq::synth {
namespace {

// Generates rows [row0, row1) of a tensor as floats.
class RowGenerator {
 public:
  explicit RowGenerator(const Options& o) : o_(o) {
    // A fixed unit direction: embeddings lean along it and routers read it, which makes
    // expert popularity skewed (Zipf-like) in a way the model itself produces.
    NormalStream s(stream_key(o.seed, ~0ull, 0));
    direction_.resize(static_cast<size_t>(o.n_embd));
    double norm = 0;
    for (float& x : direction_) x = s.next(), norm += double{x} * x;
    for (float& x : direction_) x = static_cast<float>(x / std::sqrt(norm));
  }

  void fill(const TensorPlan& t, size_t tensor_index, int64_t row, float* out) const {
    const int64_t n = t.dims[0];
    NormalStream s(stream_key(o_.seed, tensor_index, static_cast<uint64_t>(row)));
    for (int64_t i = 0; i < n; ++i) out[i] = s.next() * t.scale;
    if (t.init == Init::kNormGain) {
      for (int64_t i = 0; i < n; ++i) out[i] += 1.0f;
    } else if (t.init == Init::kNegExp) {
      for (int64_t i = 0; i < n; ++i) out[i] = -std::exp(t.offset + out[i]);
    } else if (t.offset != 0) {
      for (int64_t i = 0; i < n; ++i) out[i] += t.offset;
    }
    if (o_.zipf <= 0) return;
    const float lean = std::sqrt(static_cast<float>(o_.n_embd));
    if (t.init == Init::kEmbedding) {
      for (int64_t i = 0; i < n; ++i) out[i] += lean * direction_[static_cast<size_t>(i)];
    } else if (t.init == Init::kRouter) {
      // Inputs project on the direction by about sqrt(n_embd)/2, so this adds a logit of
      // about -zipf * ln(rank + 1): softmax then favours low ranks like a Zipf law.
      const float rank = static_cast<float>(expert_rank(t.layer, static_cast<int>(row)));
      const float offset = -static_cast<float>(o_.zipf) * std::log(rank + 1) / (lean / 2);
      for (int64_t i = 0; i < n; ++i) out[i] += offset * direction_[static_cast<size_t>(i)];
    }
  }

 private:
  // A per-layer permutation of the experts, so popular experts differ between layers.
  int expert_rank(int layer, int expert) const {
    std::vector<int> order(static_cast<size_t>(o_.n_expert));
    std::iota(order.begin(), order.end(), 0);
    uint64_t state = stream_key(o_.seed, ~1ull, static_cast<uint64_t>(layer));
    for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[splitmix64(state) % (i + 1)]);
    return static_cast<int>(std::find(order.begin(), order.end(), expert) - order.begin());
  }

  const Options& o_;
  std::vector<float> direction_;
};

int64_t rows_of(const TensorPlan& t) {
  int64_t rows = 1;
  for (size_t d = 1; d < t.dims.size(); ++d) rows *= t.dims[d];
  return rows;
}

}  // namespace

void write_model(const Options& o, const std::string& path, PlanFn plan_tensors, MetadataFn set_metadata,
                 const ProgressFn& on_progress) {
  validate(o);
  const std::vector<TensorPlan> plan = plan_tensors(o);
  gguf::Writer w(path);
  set_metadata(w, o);
  for (const TensorPlan& t : plan) w.add_tensor(t.name, t.type, t.dims);
  w.begin_data();

  ThreadPool pool(o.threads > 0 ? o.threads : physical_core_count());
  const RowGenerator gen(o);
  constexpr int64_t kBatchElements = 4 << 20;  // floats generated per batch, all threads together
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()));
  std::vector<uint8_t> out;
  uint64_t total = 0;
  for (const TensorPlan& t : plan) total += static_cast<uint64_t>(quant::row_bytes(t.type, t.dims[0])) * static_cast<uint64_t>(rows_of(t));
  Progress p{0, static_cast<int>(plan.size()), "", 0, total};

  for (size_t ti = 0; ti < plan.size(); ++ti) {
    const TensorPlan& t = plan[ti];
    const int64_t row_len = t.dims[0];
    const int64_t n_rows = rows_of(t);
    const int64_t row_bytes = quant::row_bytes(t.type, row_len);
    const int64_t batch_rows = std::max<int64_t>(1, kBatchElements / row_len);
    p.tensor = static_cast<int>(ti + 1);
    p.name = t.name.c_str();
    for (int64_t r0 = 0; r0 < n_rows; r0 += batch_rows) {
      const int64_t rows = std::min(batch_rows, n_rows - r0);
      out.resize(static_cast<size_t>(rows * row_bytes));
      pool.run(rows, [&](int64_t i, int thread) {
        std::vector<float>& buf = scratch[static_cast<size_t>(thread)];
        buf.resize(static_cast<size_t>(row_len));
        gen.fill(t, ti, r0 + i, buf.data());
        quant::quantize_row(t.type, buf.data(), out.data() + i * row_bytes, row_len);
      });
      w.write_data(out);
      p.bytes_done += out.size();
      on_progress(p);
    }
  }
  w.finish();
}

}  // namespace epq::synth
