#pragma once
// A resident SwiGLU feed-forward network: a dense FFN layer, or a shared expert that
// every token runs next to the routed ones:
//   y = down(silu(gate h) * up h)
//   gated (ffn_gate_inp_shexp): y *= sigmoid(g . h), one scalar per token
//   out += y
#include <cstdint>
#include <string>

#include "core/matrix.h"
#include "models/activations.h"
#include "models/weight_binder.h"

namespace epq::models {

struct FfnWeights {
  Matrix gate, up, down;
  const float* gate_inp = nullptr;  // [n_embd] output-gate vector, or null
};

// Binds blk.<layer>.ffn_{gate,up,down}<suffix> ("" for a dense FFN, "_shexp" for a shared
// expert), and ffn_gate_inp<suffix> when gated.
FfnWeights bind_ffn(const WeightBinder& w, int layer, const std::string& suffix, int64_t n_embd, int64_t n_ff, bool gated);

class SwigluFfn {
 public:
  SwigluFfn(StateAllocator& alloc, int64_t n_embd, int64_t n_ff, int max_tokens);
  // out[t] += y(act.xn[t]) for every token (act.input holds act.xn).
  void forward(ThreadPool& pool, const FfnWeights& w, Activations& act, int64_t n_tokens, float* out);

 private:
  int64_t n_embd_, n_ff_;
  Buffer gate_out_, up_out_, down_out_;
  QuantizedInput hidden_;
};

}  // namespace epq::models
