#include "models/feed_forward.h"

#include <algorithm>

namespace epq::models {
namespace {

int widest(const std::vector<int>& n_ff) { return n_ff.empty() ? 0 : *std::max_element(n_ff.begin(), n_ff.end()); }

}  // namespace

FeedForwardWeights bind_feed_forward(const WeightBinder& w, int layer, const FeedForwardShape& s) {
  const int64_t E = s.moe.n_embd;
  FeedForwardWeights f;
  if (layer < s.n_dense) {
    f.dense = bind_ffn(w, layer, "", E, s.n_ff_dense[static_cast<size_t>(layer)], false);
    return f;
  }
  f.moe = bind_moe(w, layer, s.moe, s.selection_bias && w.has("blk." + std::to_string(layer) + ".exp_probs_b.bias"));
  if (s.n_ff_shared > 0) f.shared = bind_ffn(w, layer, "_shexp", E, s.n_ff_shared, s.shared_gated);
  return f;
}

FeedForward::FeedForward(StateAllocator& alloc, const FeedForwardShape& shape, int max_tokens)
    : s_(shape),
      dense_(alloc, shape.moe.n_embd, widest(shape.n_ff_dense), max_tokens),
      moe_(alloc, shape.moe, max_tokens),
      shared_(alloc, shape.moe.n_embd, shape.n_ff_shared, max_tokens) {}

void FeedForward::forward(ThreadPool& pool, const FeedForwardWeights& w, int layer, const ExpertLayout& layout, ExpertSource& experts,
                          Activations& act, int64_t T, ForwardTiming* timing) {
  if (layer < s_.n_dense) {
    act.clear_output(T);
    return dense_.forward(pool, w.dense, act, T, act.out.as<float>());
  }
  moe_.forward(pool, w.moe, layout, layer, experts, act, T, timing);
  if (s_.n_ff_shared > 0) shared_.forward(pool, w.shared, act, T, act.out.as<float>());
}

}  // namespace epq::models
