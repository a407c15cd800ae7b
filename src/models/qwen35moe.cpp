// Qwen3.5 / Qwen3.6 MoE, as llama.cpp builds it (src/models/qwen35moe.cpp): a hybrid in
// which three layers in four are Gated DeltaNet linear attention and every fourth is
// gated full attention; every layer's FFN is routed experts plus a gated shared expert.
//   x = embed(tokens)
//   per layer:  h = rms_norm(x, attn_norm)
//               x += recurrent(l) ? gated_delta_net(h) : gated_attention(h)
//               h = rms_norm(x, post_attention_norm)           (the pre-FFN norm)
//               x += feed_forward(h) = moe(h) + sigmoid(g . h) * shared_expert(h)
//   logits = output(rms_norm(x))
// Layer l is recurrent unless (l + 1) % full_attention_interval == 0. Trailing MTP
// (NextN) blocks, nextn_predict_layers of them, are not part of the forward pass.
// Full attention rotates only the first rope.dimension_count dimensions of each head
// (NEOX pairs): for text, M-RoPE's sections all carry the same position, so they drop out.
#include "models/qwen35moe.h"

#include "models/architecture_base.h"
#include "models/feed_forward.h"
#include "models/gated_delta_net.h"
#include "models/gqa_attention.h"
#include "models/hparams.h"
#include "util/error.h"

namespace epq::models {
namespace {

struct Hparams {
  int n_embd = 0, n_vocab = 0, n_layer = 0, n_ctx_train = 0;
  float rms_eps = 1e-6f;
  std::vector<bool> recurrent;  // per layer
  GqaShape attn;
  DeltaNetShape delta;
  FeedForwardShape ffn;
  int count(bool rec) const { return static_cast<int>(std::count(recurrent.begin(), recurrent.end(), rec)); }
};

Hparams read_hparams(const gguf::File& f, const ModelOptions& options) {
  const HparamReader r(f, "qwen35moe");
  Hparams h;
  const int n_embd = h.n_embd = r.count("embedding_length");
  const int block_count = r.count("block_count");
  const int nextn = r.count_or_zero("nextn_predict_layers");
  if (nextn >= block_count) fail("{}: {} NextN layers leave none of the {} blocks to run", f.path(), nextn, block_count);
  h.n_layer = block_count - nextn;
  h.n_ctx_train = r.count("context_length");
  h.n_vocab = r.vocab_size();
  h.rms_eps = r.real("attention.layer_norm_rms_epsilon", 1e-12, 0.1);

  GqaShape& a = h.attn = gqa_shape(r, n_embd, r.count("attention.head_count"), h.rms_eps);
  a.gate = GqaShape::Gate::kSigmoidInQuery;
  const int n_rot = r.count_or("rope.dimension_count", a.head_dim);
  if (n_rot > a.head_dim || n_rot % 2 != 0) fail("{}: rope.dimension_count {} must be even and at most the head dimension {}", f.path(), n_rot, a.head_dim);
  const std::vector<int> sections = r.int_array("rope.dimension_sections", 4);
  if (sections[0] + sections[1] + sections[2] + sections[3] > n_rot / 2) {
    fail("{}: rope.dimension_sections sum to more than {} pairs", f.path(), n_rot / 2);
  }
  a.rope = r.rope(n_rot, h.n_ctx_train);

  DeltaNetShape& d = h.delta;
  d.n_embd = n_embd;
  d.conv_kernel = r.count("ssm.conv_kernel");
  d.head_dim = r.count("ssm.state_size");
  d.n_k_heads = r.count("ssm.group_count");
  d.n_v_heads = r.count("ssm.time_step_rank");
  d.rms_eps = h.rms_eps;
  d.chunked = options.chunked_delta_rule;
  if (d.conv_kernel > 16) fail("{}: ssm.conv_kernel {} is out of range (1 to 16)", f.path(), d.conv_kernel);
  if (d.head_dim > 512 || d.head_dim % 8 != 0) fail("{}: ssm.state_size {} must be a multiple of 8 up to 512", f.path(), d.head_dim);
  if (d.n_v_heads % d.n_k_heads != 0) fail("{}: {} value heads are not a multiple of {} key heads", f.path(), d.n_v_heads, d.n_k_heads);
  if (const int inner = r.count("ssm.inner_size"); inner != d.value_dim()) {
    fail("{}: ssm.inner_size {} != time_step_rank x state_size = {}", f.path(), inner, d.value_dim());
  }

  MoeShape& m = h.ffn.moe;
  m.n_embd = n_embd;
  m.n_expert = r.count("expert_count");
  m.n_expert_used = r.expert_used(m.n_expert, options.expert_used);
  const int n_ff = r.count_or("feed_forward_length", 1);
  m.n_ff = r.count_or("expert_feed_forward_length", n_ff / m.n_expert_used);
  h.ffn.n_ff_shared = r.count_or("expert_shared_feed_forward_length", n_ff);
  h.ffn.shared_gated = true;

  const int interval = r.count_or("full_attention_interval", 4);
  for (int l = 0; l < h.n_layer; ++l) h.recurrent.push_back((l + 1) % interval != 0);
  return h;
}

class State : public BatchState {
 public:
  State(StateAllocator& alloc, const Hparams& h, int n_ctx, int batch, int n_threads)
      : BatchState(alloc, n_ctx, batch, h.n_embd),
        attention(alloc, h.attn, h.count(false), n_ctx, batch, n_threads),
        delta_net(alloc, h.delta, h.count(true), batch, n_threads),
        ffn(alloc, h.ffn, batch) {}
  void save_recurrent(uint8_t* out) const override { std::copy_n(delta_net.state(), delta_net.state_bytes(), out); }
  void load_recurrent(const uint8_t* in) override { std::copy_n(in, delta_net.state_bytes(), delta_net.state()); }
  void reset_recurrent() override { delta_net.reset(); }

  GqaAttention attention;
  GatedDeltaNet delta_net;
  FeedForward ffn;
};

struct Layer {
  bool recurrent;
  int slot;  // index among the layers of its kind: the KV cache or recurrent state it uses
  const float* attn_norm;
  GqaWeights attn;
  DeltaNetWeights delta;
  const float* ffn_norm;
  FeedForwardWeights ffn;
};

class Qwen35Moe : public ModelBase<Hparams, State> {
 public:
  Qwen35Moe(const gguf::File& f, const ResidentWeights& weights, const ModelOptions& options)
      : ModelBase(f, weights, read_hparams(f, options), qwen35moe_info(f, options)) {
    const int E = h_.n_embd;
    int slots[2] = {0, 0};
    for (int l = 0; l < h_.n_layer; ++l) {
      Layer L{};
      L.recurrent = h_.recurrent[static_cast<size_t>(l)];
      L.slot = slots[L.recurrent]++;
      L.attn_norm = w_.vector(layer_tensor(l, "attn_norm"), E);
      if (L.recurrent) L.delta = bind_delta_net(w_, l, h_.delta);
      else L.attn = bind_gqa(w_, l, h_.attn, true);
      L.ffn_norm = w_.vector(layer_tensor(l, "post_attention_norm"), E);
      L.ffn = bind_feed_forward(w_, l, h_.ffn);
      layers_.push_back(L);
    }
  }

  void forward(ForwardState& base, ExpertSource& experts, ThreadPool& pool, std::span<const int32_t> tokens, int32_t pos0,
               bool all_logits, float* logits, ForwardTiming* timing) const override {
    auto& s = static_cast<State&>(base);
    Activations& act = s.act;
    forward_frame(s, embedding_, output_, pool, tokens, pos0, all_logits, logits, timing, [&](int64_t T) {
      s.attention.prepare(act, T);
      for (int l = 0; l < h_.n_layer; ++l) {
        const Layer& L = layers_[static_cast<size_t>(l)];
        act.norm_input(pool, L.attn_norm, h_.rms_eps, T);
        if (L.recurrent) s.delta_net.forward(pool, L.delta, L.slot, act, T);
        else s.attention.forward(pool, L.attn, L.slot, act, T, pos0);
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

ModelInfo qwen35moe_info(const gguf::File& f, const ModelOptions& options) {
  const Hparams h = read_hparams(f, options);
  matrix_tensor(f, "token_embd.weight", h.n_embd, h.n_vocab);
  ModelInfo info = moe_model_info(f, "qwen35moe", {h.n_vocab, h.n_embd, h.n_layer, h.n_ctx_train}, h.ffn.moe, 0);
  info.recurrent_bytes = static_cast<uint64_t>(h.count(true)) * h.delta.state_floats() * sizeof(float);
  return info;
}

uint64_t qwen35moe_state_bytes(const gguf::File& f, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads) {
  return Qwen35Moe::state_bytes(read_hparams(f, options), n_ctx, max_tokens, n_threads);
}

std::unique_ptr<Model> load_qwen35moe(const gguf::File& f, const ResidentWeights& w, const ModelOptions& options) {
  return std::make_unique<Qwen35Moe>(f, w, options);
}

}  // namespace epq::models
