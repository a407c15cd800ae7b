#include "models/swiglu_ffn.h"

#include "core/matmul.h"
#include "core/ops.h"

namespace epq::models {

FfnWeights bind_ffn(const WeightBinder& w, int layer, const std::string& suffix, int64_t n_embd, int64_t n_ff, bool gated) {
  auto name = [&](const char* what) { return layer_tensor(layer, (what + suffix).c_str()); };
  FfnWeights f;
  f.gate = w.matrix(name("ffn_gate"), n_embd, n_ff);
  f.up = w.matrix(name("ffn_up"), n_embd, n_ff);
  f.down = w.matrix(name("ffn_down"), n_ff, n_embd);
  if (gated) f.gate_inp = w.vector(name("ffn_gate_inp"), n_embd);
  return f;
}

SwigluFfn::SwigluFfn(StateAllocator& alloc, int64_t n_embd, int64_t n_ff, int max_tokens)
    : n_embd_(n_embd),
      n_ff_(n_ff),
      gate_out_(alloc.take(static_cast<size_t>(max_tokens * n_ff) * sizeof(float))),
      up_out_(alloc.take(static_cast<size_t>(max_tokens * n_ff) * sizeof(float))),
      down_out_(alloc.take(static_cast<size_t>(max_tokens * n_embd) * sizeof(float))),
      hidden_(alloc.input(max_tokens, n_ff)) {}

void SwigluFfn::forward(ThreadPool& pool, const FfnWeights& w, Activations& act, int64_t T, float* out) {
  const int64_t E = n_embd_, F = n_ff_;
  float* g = gate_out_.as<float>();
  const MatmulJob gate_up[] = {matmul_job(w.gate, act.input, g, static_cast<size_t>(F)),
                               matmul_job(w.up, act.input, up_out_.as<float>(), static_cast<size_t>(F))};
  run_shared_matmuls(pool, gate_up);
  pool.run(T, [&](int64_t t, int) { ops::swiglu(g + t * F, up_out_.as<float>() + t * F, F, g + t * F); });
  hidden_.set(pool, g, T, F, static_cast<size_t>(F));
  const MatmulJob down[] = {matmul_job(w.down, hidden_, down_out_.as<float>(), static_cast<size_t>(E))};
  run_shared_matmuls(pool, down);
  pool.run(T, [&](int64_t t, int) {
    const float* h = act.xn.as<float>() + t * E;
    float* y = down_out_.as<float>() + t * E;
    if (w.gate_inp) {
      float dot = 0;
      for (int64_t i = 0; i < E; ++i) dot += w.gate_inp[i] * h[i];
      const float scale = ops::sigmoid(dot);
      for (int64_t i = 0; i < E; ++i) y[i] *= scale;
    }
    ops::add(out + t * E, y, E);
  });
}

}  // namespace epq::models
