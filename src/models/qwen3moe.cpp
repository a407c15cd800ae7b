// Qwen3-MoE, the graph of Qwen3-30B-A3B as llama.cpp builds it:
//   x = embed(tokens)
//   per layer:  x += attention(rms_norm(x))     grouped-query, q/k norms, NEOX rope
//               x += moe(rms_norm(x))           softmax -> top-k -> renormalised
//   logits = output(rms_norm(x))
#include "models/qwen3moe.h"

#include "models/architecture_base.h"
#include "models/gqa_attention.h"
#include "models/hparams.h"
#include "models/routed_moe.h"
#include "util/error.h"

namespace epq::models {
namespace {

struct Hparams {
  int n_embd = 0, n_vocab = 0, n_layer = 0, n_ctx_train = 0;
  float rms_eps = 1e-6f;
  GqaShape attn;
  MoeShape moe;
};

Hparams read_hparams(const gguf::File& f, const ModelOptions& options) {
  const HparamReader r(f, "qwen3moe");
  Hparams h;
  h.n_embd = r.count("embedding_length");
  h.n_layer = r.count("block_count");
  h.n_ctx_train = r.count("context_length");
  h.rms_eps = r.real("attention.layer_norm_rms_epsilon", 1e-12, 0.1);
  h.n_vocab = r.vocab_size();
  GqaShape& a = h.attn = gqa_shape(r, h.n_embd, r.count("attention.head_count"), h.rms_eps);
  MoeShape& m = h.moe;
  m.n_embd = a.n_embd;
  m.n_expert = r.count("expert_count");
  m.n_expert_used = r.expert_used(m.n_expert, options.expert_used);
  const gguf::TensorInfo* gate = f.find_tensor("blk.0.ffn_gate_exps.weight");
  m.n_ff = r.count_or("expert_feed_forward_length", gate && gate->dims.size() == 3 ? gate->dims[1] : 0);
  a.rope = r.rope(a.head_dim, h.n_ctx_train);
  return h;
}

class State : public BatchState {
 public:
  State(StateAllocator& alloc, const Hparams& h, int n_ctx, int batch, int n_threads)
      : BatchState(alloc, n_ctx, batch, h.n_embd),
        attention(alloc, h.attn, h.n_layer, n_ctx, batch, n_threads), moe(alloc, h.moe, batch) {}

  GqaAttention attention;
  RoutedMoe moe;
};

struct Layer {
  const float* attn_norm;
  GqaWeights attn;
  const float* ffn_norm;
  MoeWeights moe;
};

class Qwen3Moe : public ModelBase<Hparams, State> {
 public:
  Qwen3Moe(const gguf::File& f, const ResidentWeights& weights, const ModelOptions& options)
      : ModelBase(f, weights, read_hparams(f, options), qwen3moe_info(f, options)) {
    for (int l = 0; l < h_.n_layer; ++l) {
      layers_.push_back({w_.vector(layer_tensor(l, "attn_norm"), h_.n_embd), bind_gqa(w_, l, h_.attn, true),
                         w_.vector(layer_tensor(l, "ffn_norm"), h_.n_embd), bind_moe(w_, l, h_.moe, false)});
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
        s.attention.forward(pool, L.attn, l, act, T, pos0);
        act.add_output(T);
        act.norm_input(pool, L.ffn_norm, h_.rms_eps, T);
        s.moe.forward(pool, L.moe, info_.experts[static_cast<size_t>(l)], l, experts, act, T, timing);
        act.add_output(T);
      }
    });
  }

 private:
  std::vector<Layer> layers_;
};

}  // namespace

ModelInfo qwen3moe_info(const gguf::File& f, const ModelOptions& options) {
  const Hparams h = read_hparams(f, options);
  // The sizes the memory plan multiplies, checked against the tensors before any plan.
  matrix_tensor(f, "token_embd.weight", h.n_embd, h.n_vocab);
  matrix_tensor(f, "blk.0.attn_q.weight", h.n_embd, h.attn.q_dim());
  matrix_tensor(f, "blk.0.attn_k.weight", h.n_embd, h.attn.kv_dim());
  return moe_model_info(f, "qwen3moe", {h.n_vocab, h.n_embd, h.n_layer, h.n_ctx_train}, h.moe, 0);
}

uint64_t qwen3moe_state_bytes(const gguf::File& f, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads) {
  return Qwen3Moe::state_bytes(read_hparams(f, options), n_ctx, max_tokens, n_threads);
}

std::unique_ptr<Model> load_qwen3moe(const gguf::File& f, const ResidentWeights& w, const ModelOptions& options) {
  return std::make_unique<Qwen3Moe>(f, w, options);
}

}  // namespace epq::models
