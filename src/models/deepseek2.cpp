// DeepSeek-V2/V3 and Xing4.0, as llama.cpp builds them (src/models/deepseek2.cpp, xing4_0.cpp):
//   x = embed(tokens)
//   per layer:  x += mla_attention(rms_norm(x, attn_norm))
//               x += feed_forward(rms_norm(x, ffn_norm)): l < n_dense ? dense_ffn : moe + shared_expert
//   logits = output(rms_norm(x))
// The router is softmax or sigmoid with an optional selection bias and group-limited
// top-k, its weights optionally normalised, then scaled; the shared experts have no gate.
// xing4_0 wraps each sub-layer in hyper-connections instead of the residual adds (four
// streams, whose mean is the final hidden state). Trailing MTP blocks
// (nextn_predict_layers) are not run.
#include "models/deepseek2.h"

#include <optional>

#include "models/architecture_base.h"
#include "models/feed_forward.h"
#include "models/hparams.h"
#include "models/hyper_connections.h"
#include "models/mla_attention.h"
#include "util/error.h"

namespace epq::models {
namespace {

struct Hparams {
  std::string arch;
  int n_embd = 0, n_vocab = 0, n_layer = 0, n_ctx_train = 0;
  float rms_eps = 1e-6f;
  MlaShape mla;
  FeedForwardShape ffn;
  std::optional<HcShape> hc;  // xing4_0
};

Hparams read_hparams(const gguf::File& f, const ModelOptions& options) {
  Hparams h;
  h.arch = f.get_string("general.architecture");
  const HparamReader r(f, h.arch);
  const int n_embd = h.n_embd = r.count("embedding_length");
  const int block_count = r.count("block_count");
  const int nextn = r.count_or_zero("nextn_predict_layers");
  if (nextn >= block_count) fail("{}: {} NextN layers leave none of the {} blocks to run", f.path(), nextn, block_count);
  h.n_layer = block_count - nextn;
  h.n_ctx_train = r.count("context_length");
  h.n_vocab = r.vocab_size();
  h.rms_eps = r.real("attention.layer_norm_rms_epsilon", 1e-12, 0.1);
  FeedForwardShape& ffn = h.ffn;
  ffn.n_dense = r.count_or_zero("leading_dense_block_count");
  if (ffn.n_dense >= h.n_layer) fail("{}: {} leading dense blocks leave no MoE layer of {}", f.path(), ffn.n_dense, h.n_layer);
  if (ffn.n_dense > 0) ffn.n_ff_dense.assign(static_cast<size_t>(ffn.n_dense), r.count("feed_forward_length"));
  h.mla = read_mla_shape(r, n_embd, h.n_ctx_train, h.rms_eps);

  MoeShape& m = ffn.moe;
  m.n_embd = n_embd;
  m.n_expert = r.count("expert_count");
  m.n_expert_used = r.expert_used(m.n_expert, options.expert_used);
  const std::vector<int> n_ff = r.per_layer("expert_feed_forward_length", block_count);
  m.n_ff = n_ff[static_cast<size_t>(ffn.n_dense)];
  for (int l = ffn.n_dense; l < h.n_layer; ++l) {
    if (n_ff[static_cast<size_t>(l)] != m.n_ff) fail("{}: expert feed-forward lengths that differ between layers are not supported", f.path());
  }
  // Softmax unless the file says otherwise; GLM-4.7-Lite files (47 or 48 blocks, a
  // vocabulary of 154880) leave the key out and mean sigmoid, as llama.cpp reads them.
  const bool glm_lite = (block_count == 47 || block_count == 48) && h.n_vocab == 154880;
  m.router = read_router_config(r, {glm_lite ? RouterConfig::Gating::kSigmoid : RouterConfig::Gating::kSoftmax, false});
  if (m.n_expert % m.router.n_group != 0) fail("{}: {} experts do not split into {} groups", f.path(), m.n_expert, m.router.n_group);
  ffn.n_ff_shared = m.n_ff * r.count_or_zero("expert_shared_count");
  ffn.selection_bias = true;

  if (h.arch == "xing4_0") {
    HcShape& c = h.hc.emplace();
    c.n_embd = n_embd;
    c.n_streams = r.count("hyper_connection.count");
    c.iterations = r.count("hyper_connection.sinkhorn_iterations");
    c.eps = r.real("hyper_connection.epsilon", 0, 1);
    c.rms_eps = h.rms_eps;
    if (c.n_streams > 16) fail("{}: {} hyper-connection streams (at most 16)", f.path(), c.n_streams);
  }
  return h;
}

class State : public BatchState {
 public:
  State(StateAllocator& alloc, const Hparams& h, int n_ctx, int batch, int n_threads)
      : BatchState(alloc, n_ctx, batch, h.n_embd),
        attention(alloc, h.mla, h.n_layer, n_ctx, batch, n_threads),
        ffn(alloc, h.ffn, batch) {
    if (h.hc) hc.emplace(alloc, *h.hc, batch);
  }

  MlaAttention attention;
  FeedForward ffn;
  std::optional<HyperConnections> hc;
};

struct Layer {
  const float* attn_norm;
  MlaWeights attn;
  const float* ffn_norm;
  FeedForwardWeights ffn;
  HcWeights hc_attn, hc_ffn;  // xing4_0
};

class Deepseek2 : public ModelBase<Hparams, State> {
 public:
  Deepseek2(const gguf::File& f, const ResidentWeights& weights, const ModelOptions& options)
      : ModelBase(f, weights, read_hparams(f, options), deepseek2_info(f, options)) {
    const int E = h_.n_embd;
    for (int l = 0; l < h_.n_layer; ++l) {
      Layer L{};
      L.attn_norm = w_.vector(layer_tensor(l, "attn_norm"), E);
      L.attn = bind_mla(w_, l, h_.mla);
      L.ffn_norm = w_.vector(layer_tensor(l, "ffn_norm"), E);
      L.ffn = bind_feed_forward(w_, l, h_.ffn);
      if (h_.hc) {
        L.hc_attn = bind_hc(w_, l, "attn", *h_.hc);
        L.hc_ffn = bind_hc(w_, l, "ffn", *h_.hc);
      }
      layers_.push_back(L);
    }
  }

  void forward(ForwardState& base, ExpertSource& experts, ThreadPool& pool, std::span<const int32_t> tokens, int32_t pos0,
               bool all_logits, float* logits, ForwardTiming* timing) const override {
    auto& s = static_cast<State&>(base);
    Activations& act = s.act;
    forward_frame(s, embedding_, output_, pool, tokens, pos0, all_logits, logits, timing, [&](int64_t T) {
      // A sub-layer reads rms_norm(x) and adds its output act.out back, or with
      // hyper-connections reads and rewrites the streams.
      auto sublayer = [&](const HcWeights& hc, const float* norm, auto&& body) {
        if (s.hc) s.hc->begin_sublayer(pool, hc, act, T);
        act.norm_input(pool, norm, h_.rms_eps, T);
        body();
        if (s.hc) s.hc->end_sublayer(pool, act, T);
        else act.add_output(T);
      };
      s.attention.prepare(act, T);
      if (s.hc) s.hc->start(act, T);
      for (int l = 0; l < h_.n_layer; ++l) {
        const Layer& L = layers_[static_cast<size_t>(l)];
        sublayer(L.hc_attn, L.attn_norm, [&] { s.attention.forward(pool, L.attn, l, act, T, pos0); });
        sublayer(L.hc_ffn, L.ffn_norm, [&] { s.ffn.forward(pool, L.ffn, l, info_.experts[static_cast<size_t>(l)], experts, act, T, timing); });
      }
      if (s.hc) s.hc->finish(act, T);
    });
  }

 private:
  std::vector<Layer> layers_;
};

}  // namespace

ModelInfo deepseek2_info(const gguf::File& f, const ModelOptions& options) {
  const Hparams h = read_hparams(f, options);
  matrix_tensor(f, "token_embd.weight", h.n_embd, h.n_vocab);
  return moe_model_info(f, h.arch, {h.n_vocab, h.n_embd, h.n_layer, h.n_ctx_train}, h.ffn.moe, h.ffn.n_dense);
}

uint64_t deepseek2_state_bytes(const gguf::File& f, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads) {
  return Deepseek2::state_bytes(read_hparams(f, options), n_ctx, max_tokens, n_threads);
}

std::unique_ptr<Model> load_deepseek2(const gguf::File& f, const ResidentWeights& w, const ModelOptions& options) {
  return std::make_unique<Deepseek2>(f, w, options);
}

}  // namespace epq::models
