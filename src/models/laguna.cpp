// poolside Laguna, as llama.cpp builds it (src/models/laguna.cpp):
//   x = embed(tokens)
//   per layer:  h = rms_norm(x, attn_norm)
//               x += attention_l(h) * softplus(attn_gate h), before attn_output
//               h = rms_norm(x, ffn_norm)
//               x += feed_forward(h): l < n_dense ? dense_ffn(h) : moe(h) + shared_expert(h)
//   logits = output(rms_norm(x))
// With attention.sliding_window = W > 0, layer l is sliding-window iff l % P != 0
// (P = attention.sliding_window_pattern, 4 by default): plain rope with its own base and
// dimensions, and a KV ring that never grows past the window. Full layers use partial
// rotary with YaRN. Head counts are per layer; the KV width is not. The router is
// sigmoid, its bias picks the experts but does not weight them, and the weights are
// normalised then scaled (expert_weights_norm, expert_weights_scale). The shared expert
// has no gate.
#include "models/laguna.h"

#include <algorithm>

#include "models/architecture_base.h"
#include "models/feed_forward.h"
#include "models/gqa_attention.h"
#include "models/hparams.h"
#include "util/error.h"

namespace epq::models {
namespace {

struct Hparams {
  int n_embd = 0, n_vocab = 0, n_layer = 0, n_ctx_train = 0;
  float rms_eps = 1e-6f;
  std::vector<GqaShape> attention_kinds;  // distinct (window, heads) shapes
  std::vector<int> kind_of_layer;
  FeedForwardShape ffn;
};

Hparams read_hparams(const gguf::File& f, const ModelOptions& options) {
  const HparamReader r(f, "laguna");
  Hparams h;
  const int n_embd = h.n_embd = r.count("embedding_length");
  h.n_layer = r.count("block_count");
  h.n_ctx_train = r.count("context_length");
  h.n_vocab = r.vocab_size();
  h.rms_eps = r.real("attention.layer_norm_rms_epsilon", 1e-12, 0.1);
  FeedForwardShape& ffn = h.ffn;
  ffn.n_dense = r.count_or_zero("leading_dense_block_count");
  if (ffn.n_dense > h.n_layer) fail("{}: {} leading dense blocks exceed the {} blocks", f.path(), ffn.n_dense, h.n_layer);
  if (ffn.n_dense > 0) ffn.n_ff_dense = r.per_layer("feed_forward_length", h.n_layer);
  ffn.n_ff_dense.resize(static_cast<size_t>(ffn.n_dense));

  const std::vector<int> n_head = r.per_layer("attention.head_count", h.n_layer);
  const int window = r.count_or_zero("attention.sliding_window");
  const int pattern = r.count_or("attention.sliding_window_pattern", 4);
  GqaShape full = gqa_shape(r, n_embd, n_head[0], h.rms_eps);
  full.gate = GqaShape::Gate::kSoftplus;
  full.rope = r.rope(r.count_or("rope.dimension_count", full.head_dim), h.n_ctx_train);
  GqaShape swa = full;
  swa.window = window;
  swa.rope = RopeParams{};
  swa.rope.n_dims = r.count_or("rope.dimension_count_swa", full.rope.n_dims);
  swa.rope.freq_base = r.real_or("rope.freq_base_swa", full.rope.freq_base, 1, 1e12);
  for (const GqaShape& s : {full, swa}) {
    if (s.rope.n_dims > s.head_dim || s.rope.n_dims % 2 != 0) {
      fail("{}: rotary dimensions {} must be even and at most the head dimension {}", f.path(), s.rope.n_dims, s.head_dim);
    }
  }
  for (int l = 0; l < h.n_layer; ++l) {
    GqaShape s = window > 0 && l % pattern != 0 ? swa : full;
    s.n_head = n_head[static_cast<size_t>(l)];
    if (gqa_shape(r, n_embd, s.n_head, h.rms_eps).head_dim != s.head_dim) fail("{}: layers differ in head dimension", f.path());
    auto same = [&](const GqaShape& k) { return k.n_head == s.n_head && k.window == s.window; };
    auto kind = std::find_if(h.attention_kinds.begin(), h.attention_kinds.end(), same);
    h.kind_of_layer.push_back(static_cast<int>(kind - h.attention_kinds.begin()));
    if (kind == h.attention_kinds.end()) h.attention_kinds.push_back(s);
  }

  MoeShape& m = ffn.moe;
  m.n_embd = n_embd;
  m.n_expert = r.count("expert_count");
  m.n_expert_used = r.expert_used(m.n_expert, options.expert_used);
  m.n_ff = r.count("expert_feed_forward_length");
  m.router = read_router_config(r, {RouterConfig::Gating::kSigmoid, false});
  ffn.n_ff_shared = r.count_or("expert_shared_feed_forward_length", int64_t{m.n_ff} * r.count_or("expert_shared_count", 1));
  ffn.selection_bias = true;
  return h;
}

class State : public BatchState {
 public:
  State(StateAllocator& alloc, const Hparams& h, int n_ctx, int batch, int n_threads)
      : BatchState(alloc, n_ctx, batch, h.n_embd), ffn(alloc, h.ffn, batch) {
    attention.reserve(h.attention_kinds.size());
    for (size_t k = 0; k < h.attention_kinds.size(); ++k) {
      const int layers = static_cast<int>(std::count(h.kind_of_layer.begin(), h.kind_of_layer.end(), static_cast<int>(k)));
      attention.emplace_back(alloc, h.attention_kinds[k], layers, n_ctx, batch, n_threads);
    }
  }
  int32_t oldest_rollback(int32_t position) const override {
    int32_t oldest = 0;
    for (const GqaAttention& a : attention) oldest = std::max(oldest, a.oldest_rollback(position));
    return oldest;
  }

  std::vector<GqaAttention> attention;  // one per attention kind
  FeedForward ffn;
};

struct Layer {
  int kind, slot;  // attention kind, and the layer's KV cache among that kind's
  const float* attn_norm;
  GqaWeights attn;
  const float* ffn_norm;
  FeedForwardWeights ffn;
};

class Laguna : public ModelBase<Hparams, State> {
 public:
  Laguna(const gguf::File& f, const ResidentWeights& weights, const ModelOptions& options)
      : ModelBase(f, weights, read_hparams(f, options), laguna_info(f, options)) {
    const int E = h_.n_embd;
    std::vector<int> slots(h_.attention_kinds.size());
    for (int l = 0; l < h_.n_layer; ++l) {
      Layer L{};
      L.kind = h_.kind_of_layer[static_cast<size_t>(l)];
      L.slot = slots[static_cast<size_t>(L.kind)]++;
      L.attn_norm = w_.vector(layer_tensor(l, "attn_norm"), E);
      L.attn = bind_gqa(w_, l, h_.attention_kinds[static_cast<size_t>(L.kind)], true);
      L.ffn_norm = w_.vector(layer_tensor(l, "ffn_norm"), E);
      L.ffn = bind_feed_forward(w_, l, h_.ffn);
      layers_.push_back(L);
    }
  }

  void forward(ForwardState& base, ExpertSource& experts, ThreadPool& pool, std::span<const int32_t> tokens, int32_t pos0,
               bool all_logits, float* logits, ForwardTiming* timing) const override {
    auto& s = static_cast<State&>(base);
    Activations& act = s.act;
    forward_frame(s, embedding_, output_, pool, tokens, pos0, all_logits, logits, timing, [&](int64_t T) {
      for (GqaAttention& a : s.attention) a.prepare(act, T);
      for (int l = 0; l < h_.n_layer; ++l) {
        const Layer& L = layers_[static_cast<size_t>(l)];
        act.norm_input(pool, L.attn_norm, h_.rms_eps, T);
        s.attention[static_cast<size_t>(L.kind)].forward(pool, L.attn, L.slot, act, T, pos0);
        act.add_output(T);
        act.norm_input(pool, L.ffn_norm, h_.rms_eps, T);
        s.ffn.forward(pool, L.ffn, l, info_.experts[static_cast<size_t>(l)], experts, act, T, timing);
        act.add_output(T);
      }
    });
  }

 private:
  std::vector<Layer> layers_;
};

}  // namespace

ModelInfo laguna_info(const gguf::File& f, const ModelOptions& options) {
  const Hparams h = read_hparams(f, options);
  matrix_tensor(f, "token_embd.weight", h.n_embd, h.n_vocab);
  return moe_model_info(f, "laguna", {h.n_vocab, h.n_embd, h.n_layer, h.n_ctx_train}, h.ffn.moe, h.ffn.n_dense);
}

uint64_t laguna_state_bytes(const gguf::File& f, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads) {
  return Laguna::state_bytes(read_hparams(f, options), n_ctx, max_tokens, n_threads);
}

std::unique_ptr<Model> load_laguna(const gguf::File& f, const ResidentWeights& w, const ModelOptions& options) {
  return std::make_unique<Laguna>(f, w, options);
}

}  // namespace epq::models
