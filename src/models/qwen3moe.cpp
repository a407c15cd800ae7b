#include "models/qwen3moe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/attention.h"
#include "core/matmul.h"
#include "core/ops.h"
#include "core/quantized_input.h"
#include "models/resident_experts.h"
#include "quant/float_bits.h"
#include "quant/reference.h"
#include "util/buffer.h"
#include "util/error.h"

namespace epq::models {

Qwen3MoeHparams read_qwen3moe_hparams(const gguf::File& f, const ModelOptions& options) {
  const std::string a = "qwen3moe.";
  auto positive = [&](const std::string& key, int64_t v) {
    if (v <= 0 || v > (int64_t{1} << 30)) fail("{}: metadata '{}' = {} is out of range", f.path(), key, v);
    return static_cast<int>(v);
  };
  Qwen3MoeHparams h;
  h.n_embd = positive(a + "embedding_length", f.get_int(a + "embedding_length"));
  h.n_layer = positive(a + "block_count", f.get_int(a + "block_count"));
  h.n_head = positive(a + "attention.head_count", f.get_int(a + "attention.head_count"));
  h.n_head_kv = positive(a + "attention.head_count_kv", f.get_int_or(a + "attention.head_count_kv", h.n_head));
  h.head_dim = positive(a + "attention.key_length", f.get_int_or(a + "attention.key_length", h.n_embd / h.n_head));
  const int value_dim = positive(a + "attention.value_length", f.get_int_or(a + "attention.value_length", h.head_dim));
  h.n_expert = positive(a + "expert_count", f.get_int(a + "expert_count"));
  h.n_expert_used = positive(a + "expert_used_count", f.get_int(a + "expert_used_count"));
  h.n_ctx_train = positive(a + "context_length", f.get_int(a + "context_length"));
  // A real number in [lo, hi]: NaN, infinities and absurd values are refused.
  auto real = [&](const std::string& key, double v, double lo, double hi) {
    if (!(v >= lo && v <= hi)) fail("{}: metadata '{}' = {} is out of range ({} to {})", f.path(), key, v, lo, hi);
    return static_cast<float>(v);
  };
  h.rms_eps = real(a + "attention.layer_norm_rms_epsilon", f.get_float(a + "attention.layer_norm_rms_epsilon"), 1e-12, 0.1);
  if (f.find("tokenizer.ggml.tokens")) {
    h.n_vocab = positive("tokenizer.ggml.tokens", static_cast<int64_t>(f.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING).size()));
  }
  h.n_vocab = positive(a + "vocab_size", f.get_int_or(a + "vocab_size", h.n_vocab));
  if (value_dim != h.head_dim) fail("{}: key_length {} != value_length {} is not supported", f.path(), h.head_dim, value_dim);
  if (h.n_head % h.n_head_kv != 0) fail("{}: {} heads are not a multiple of {} KV heads", f.path(), h.n_head, h.n_head_kv);
  if (h.head_dim % 8 != 0) fail("{}: head dimension {} is not a multiple of 8", f.path(), h.head_dim);
  if (options.expert_used) {
    if (*options.expert_used < 1 || *options.expert_used > h.n_expert) {
      fail("--expert-used {} is out of range: the model has {} experts per layer", *options.expert_used, h.n_expert);
    }
    h.n_expert_used = *options.expert_used;
  }
  if (h.n_expert_used > h.n_expert) fail("{}: expert_used_count {} exceeds expert_count {}", f.path(), h.n_expert_used, h.n_expert);
  const gguf::TensorInfo* gate = f.find_tensor("blk.0.ffn_gate_exps.weight");
  h.n_ff_exp = positive(a + "expert_feed_forward_length",
                        f.get_int_or(a + "expert_feed_forward_length", gate && gate->dims.size() == 3 ? gate->dims[1] : 0));

  RopeParams& r = h.rope;
  r.n_dims = h.head_dim;
  r.freq_base = real(a + "rope.freq_base", f.get_float_or(a + "rope.freq_base", 10000.0), 1, 1e12);
  r.n_ctx_orig = positive(a + "rope.scaling.original_context_length", f.get_int_or(a + "rope.scaling.original_context_length", h.n_ctx_train));
  r.attn_factor = real(a + "rope.scaling.attn_factor", f.get_float_or(a + "rope.scaling.attn_factor", 1.0), 1e-3, 1e3);
  const std::string scaling = f.get_string_or(a + "rope.scaling.type", "none");
  const double factor = real(a + "rope.scaling.factor", f.get_float_or(a + "rope.scaling.factor", 0.0), 0, 1e6);
  if (scaling == "yarn" || scaling == "linear") {
    r.freq_scale = factor > 0 ? static_cast<float>(1.0 / factor) : 1.0f;
    r.ext_factor = scaling == "yarn" ? 1.0f : 0.0f;
  } else if (scaling != "none") {
    fail("{}: rope scaling type '{}' is not supported (none, linear, yarn)", f.path(), scaling);
  }
  return h;
}

namespace {

// The tensor `name` must exist with shape [cols, rows].
const gguf::TensorInfo& matrix_tensor(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) fail("{}: missing tensor '{}'", f.path(), name);
  if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
    fail("{}: tensor '{}' has shape {}, expected [{}, {}]", f.path(), name, t->shape_string(), cols, rows);
  }
  return *t;
}

}  // namespace

ModelInfo qwen3moe_info(const gguf::File& f, const ModelOptions& options) {
  const Qwen3MoeHparams h = read_qwen3moe_hparams(f, options);
  // The sizes the memory plan multiplies, checked against the tensors before any plan.
  matrix_tensor(f, "token_embd.weight", h.n_embd, h.n_vocab);
  matrix_tensor(f, "blk.0.attn_q.weight", h.n_embd, int64_t{h.n_head} * h.head_dim);
  matrix_tensor(f, "blk.0.attn_k.weight", h.n_embd, int64_t{h.n_head_kv} * h.head_dim);
  ModelInfo info;
  info.architecture = "qwen3moe";
  info.name = f.get_string_or("general.name", "");
  info.n_vocab = h.n_vocab;
  info.n_embd = h.n_embd;
  info.n_layer = h.n_layer;
  info.n_ctx_train = h.n_ctx_train;
  info.n_expert = h.n_expert;
  info.n_expert_used = h.n_expert_used;
  info.kv_bytes_per_token = uint64_t{2} * h.n_layer * h.n_head_kv * h.head_dim * sizeof(uint16_t);
  for (int l = 0; l < h.n_layer; ++l) {
    info.experts.push_back(read_expert_layout(f, l, h.n_embd));
    if (info.experts.back().n_expert != h.n_expert) {
      fail("{}: layer {} has {} experts, metadata says {}", f.path(), l, info.experts.back().n_expert, h.n_expert);
    }
    if (info.experts.back().gate.rows != h.n_ff_exp) {
      fail("{}: layer {} experts have {} feed-forward rows, but metadata 'qwen3moe.expert_feed_forward_length' says {}", f.path(), l,
           info.experts.back().gate.rows, h.n_ff_exp);
    }
  }
  return info;
}

namespace {

class State : public ForwardState {
 public:
  State(const Qwen3MoeHparams& h, int n_ctx, int T, int threads);
  int n_ctx() const override { return ctx; }

  int ctx, max_tokens;
  Buffer k_cache, v_cache;      // [layer][position][kv_dim] F16
  Buffer x, xn, tmp;            // [T][n_embd]: residual stream, its norm, block outputs
  Buffer q, attn, k, v;         // [T][q_dim] and [T][kv_dim]
  Buffer router;                // [T][n_expert]
  Buffer gate_out, up_out;      // [T * top-k][n_ff], one row per (token, expert) assignment
  Buffer down_out;              // [T * top-k][n_embd]
  Buffer gathered_gate, gathered_up, hidden_act;  // quantized inputs of the expert matrices
  Buffer attn_scratch;          // [threads][n_ctx * kAttentionScoresPerPosition] attention scores
  QuantizedInput input;
  RopeTable rope;
  std::vector<int32_t> positions;
};

// Every buffer of a state and its size, for n_ctx positions and batches of T tokens: the
// one list both allocation and the memory plan read.
std::vector<std::pair<Buffer State::*, size_t>> state_buffers(const Qwen3MoeHparams& h, int n_ctx, int T, int threads) {
  const size_t f = sizeof(float), t = static_cast<size_t>(T);
  const size_t kv_dim = static_cast<size_t>(h.n_head_kv) * h.head_dim, q_dim = static_cast<size_t>(h.n_head) * h.head_dim;
  const size_t assign = t * static_cast<size_t>(h.n_expert_used);
  size_t act_embd = 0, act_ff = 0;  // largest activation row for n_embd / n_ff inputs
  for (int k = 0; k < quant::kActFormatCount; ++k) {
    act_embd = std::max(act_embd, quant::activation_bytes(static_cast<quant::ActFormat>(k), h.n_embd));
    act_ff = std::max(act_ff, quant::activation_bytes(static_cast<quant::ActFormat>(k), h.n_ff_exp));
  }
  const size_t cache = static_cast<size_t>(h.n_layer) * static_cast<size_t>(n_ctx) * kv_dim * sizeof(uint16_t);
  const size_t embd = t * static_cast<size_t>(h.n_embd) * f;
  return {{&State::k_cache, cache},
          {&State::v_cache, cache},
          {&State::x, embd},
          {&State::xn, embd},
          {&State::tmp, embd},
          {&State::q, t * q_dim * f},
          {&State::attn, t * q_dim * f},
          {&State::k, t * kv_dim * f},
          {&State::v, t * kv_dim * f},
          {&State::router, t * static_cast<size_t>(h.n_expert) * f},
          {&State::gate_out, assign * static_cast<size_t>(h.n_ff_exp) * f},
          {&State::up_out, assign * static_cast<size_t>(h.n_ff_exp) * f},
          {&State::down_out, assign * static_cast<size_t>(h.n_embd) * f},
          {&State::gathered_gate, assign * act_embd},
          {&State::gathered_up, assign * act_embd},
          {&State::hidden_act, assign * act_ff},
          {&State::attn_scratch, static_cast<size_t>(threads) * static_cast<size_t>(n_ctx) * kAttentionScoresPerPosition * f}};
}

int64_t input_cols(const Qwen3MoeHparams& h) { return std::max<int64_t>(h.n_embd, int64_t{h.n_head} * h.head_dim); }

State::State(const Qwen3MoeHparams& h, int n_ctx, int T, int threads)
    : ctx(n_ctx), max_tokens(T), input(T, input_cols(h)), rope(h.rope) {
  for (const auto& [member, bytes] : state_buffers(h, n_ctx, T, threads)) this->*member = Buffer(bytes);
}

struct LayerWeights {
  const float* attn_norm;
  Matrix wq, wk, wv, wo;
  const float* q_norm;
  const float* k_norm;
  const float* ffn_norm;
  Matrix router;
};

// One token's choice of an expert: slot j of token t goes to expert e with weight w.
struct Assignment {
  int token, slot, expert;
  float weight;
};

class Qwen3Moe : public Model {
 public:
  Qwen3Moe(const gguf::File& f, const ResidentWeights& w, const ModelOptions& options)
      : h_(read_qwen3moe_hparams(f, options)), info_(qwen3moe_info(f, options)) {
    const int64_t E = h_.n_embd, Q = int64_t{h_.n_head} * h_.head_dim, KV = int64_t{h_.n_head_kv} * h_.head_dim;
    embd_ = bind(f, w, "token_embd.weight", E, h_.n_vocab);
    output_ = w.has("output.weight") ? bind(f, w, "output.weight", E, h_.n_vocab) : embd_;
    output_norm_ = norm(f, w, "output_norm.weight", E);
    for (int l = 0; l < h_.n_layer; ++l) {
      auto n = [l](const char* what) { return "blk." + std::to_string(l) + "." + what + ".weight"; };
      LayerWeights L;
      L.attn_norm = norm(f, w, n("attn_norm"), E);
      L.wq = bind(f, w, n("attn_q"), E, Q);
      L.wk = bind(f, w, n("attn_k"), E, KV);
      L.wv = bind(f, w, n("attn_v"), E, KV);
      L.wo = bind(f, w, n("attn_output"), Q, E);
      L.q_norm = norm(f, w, n("attn_q_norm"), h_.head_dim);
      L.k_norm = norm(f, w, n("attn_k_norm"), h_.head_dim);
      L.ffn_norm = norm(f, w, n("ffn_norm"), E);
      L.router = bind(f, w, n("ffn_gate_inp"), E, h_.n_expert);
      layers_.push_back(L);
    }
  }

  const ModelInfo& info() const override { return info_; }

  std::unique_ptr<ForwardState> new_state(int n_ctx, int max_tokens, int n_threads) const override {
    return std::make_unique<State>(h_, n_ctx, max_tokens, n_threads);
  }

  void forward(ForwardState& base, ExpertSource& experts, ThreadPool& pool, std::span<const int32_t> tokens, int32_t pos0,
               bool all_logits, float* logits, ForwardTiming* timing) const override;

 private:
  static Matrix bind(const gguf::File& f, const ResidentWeights& w, const std::string& name, int64_t cols, int64_t rows) {
    const gguf::TensorInfo* t = &matrix_tensor(f, name, cols, rows);
    if (!quant::info(t->type).supported) {
      fail("{}: tensor '{}' has type {}, which EPQ does not support (supported: {})", f.path(), name, quant::name(t->type),
           quant::supported_type_names());
    }
    return {t->type, w.get(f, name), rows, cols, t->row_bytes()};
  }

  static const float* norm(const gguf::File& f, const ResidentWeights& w, const std::string& name, int64_t n) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    if (t == nullptr) fail("{}: missing tensor '{}'", f.path(), name);
    if (t->type != quant::Type::F32 || t->dims.size() != 1 || t->dims[0] != n) {
      fail("{}: tensor '{}' is {} {}, expected F32 [{}]", f.path(), name, quant::name(t->type), t->shape_string(), n);
    }
    return reinterpret_cast<const float*>(w.get(f, name));
  }

  void attention_block(State& s, const LayerWeights& L, int layer, ThreadPool& pool, int64_t T, int32_t pos0) const;
  void moe_block(State& s, const LayerWeights& L, int layer, ExpertSource& experts, ThreadPool& pool, int64_t T,
                 ForwardTiming* timing) const;

  Qwen3MoeHparams h_;
  ModelInfo info_;
  Matrix embd_, output_;
  const float* output_norm_;
  std::vector<LayerWeights> layers_;
};

void Qwen3Moe::attention_block(State& s, const LayerWeights& L, int layer, ThreadPool& pool, int64_t T, int32_t pos0) const {
  const int64_t E = h_.n_embd, D = h_.head_dim;
  const int64_t Q = h_.n_head * D, KV = h_.n_head_kv * D;
  float* x = s.x.as<float>();
  float* xn = s.xn.as<float>();
  pool.run(T, [&](int64_t t, int) { ops::rms_norm(x + t * E, L.attn_norm, h_.rms_eps, E, xn + t * E); });
  s.input.set(xn, T, E, static_cast<size_t>(E));
  auto job = [&](const Matrix& w, float* out, int64_t out_dim) {
    const quant::ActFormat f = quant::activation_format(w.type);
    return MatmulJob{&w, s.input.data(f), s.input.stride(f), T, out, static_cast<size_t>(out_dim)};
  };
  const MatmulJob qkv[] = {job(L.wq, s.q.as<float>(), Q), job(L.wk, s.k.as<float>(), KV), job(L.wv, s.v.as<float>(), KV)};
  run_matmuls(pool, qkv);

  // Per-head norms and rope; then K and V enter the cache as F16.
  const size_t layer_offset = static_cast<size_t>(layer) * s.ctx * KV;
  uint16_t* k_cache = s.k_cache.as<uint16_t>() + layer_offset;
  uint16_t* v_cache = s.v_cache.as<uint16_t>() + layer_offset;
  pool.run(T, [&](int64_t t, int) {
    for (int hd = 0; hd < h_.n_head; ++hd) {
      float* head = s.q.as<float>() + t * Q + hd * D;
      ops::rms_norm(head, L.q_norm, h_.rms_eps, D, head);
      s.rope.apply(head, t);
    }
    for (int hd = 0; hd < h_.n_head_kv; ++hd) {
      float* head = s.k.as<float>() + t * KV + hd * D;
      ops::rms_norm(head, L.k_norm, h_.rms_eps, D, head);
      s.rope.apply(head, t);
    }
    const size_t row = static_cast<size_t>(pos0 + t) * KV;
    for (int64_t i = 0; i < KV; ++i) {
      k_cache[row + i] = quant::f32_to_f16(s.k.as<float>()[t * KV + i]);
      v_cache[row + i] = quant::f32_to_f16(s.v.as<float>()[t * KV + i]);
    }
  });
  const AttentionShape shape{h_.n_head, h_.n_head_kv, h_.head_dim, 1.0f / std::sqrt(static_cast<float>(D))};
  attention(pool, shape, s.q.as<float>(), k_cache, v_cache, s.positions.data(), T, s.attn.as<float>(), s.attn_scratch.as<float>(), s.ctx);

  s.input.set(s.attn.as<float>(), T, Q, static_cast<size_t>(Q));
  const MatmulJob out[] = {{&L.wo, s.input.data(quant::activation_format(L.wo.type)), s.input.stride(quant::activation_format(L.wo.type)), T,
                            s.tmp.as<float>(), static_cast<size_t>(E)}};
  run_matmuls(pool, out);
  ops::add(x, s.tmp.as<float>(), T * E);
}

void Qwen3Moe::moe_block(State& s, const LayerWeights& L, int layer, ExpertSource& experts, ThreadPool& pool, int64_t T,
                         ForwardTiming* timing) const {
  const int64_t E = h_.n_embd, F = h_.n_ff_exp, K = h_.n_expert_used, NE = h_.n_expert;
  float* x = s.x.as<float>();
  float* xn = s.xn.as<float>();
  pool.run(T, [&](int64_t t, int) { ops::rms_norm(x + t * E, L.ffn_norm, h_.rms_eps, E, xn + t * E); });
  s.input.set(xn, T, E, static_cast<size_t>(E));
  const quant::ActFormat router_fmt = quant::activation_format(L.router.type);
  const MatmulJob router[] = {{&L.router, s.input.data(router_fmt), s.input.stride(router_fmt), T, s.router.as<float>(), static_cast<size_t>(NE)}};
  run_matmuls(pool, router);

  // Route: softmax over all experts, top-k by probability, weights renormalized.
  std::vector<Assignment> assignments;
  std::vector<int> order(static_cast<size_t>(NE));
  for (int64_t t = 0; t < T; ++t) {
    float* p = s.router.as<float>() + t * NE;
    ops::softmax(p, NE);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0;
    for (int64_t j = 0; j < K; ++j) sum += p[order[static_cast<size_t>(j)]];
    sum = std::max(sum, 6.103515625e-5f);
    for (int64_t j = 0; j < K; ++j) {
      const int e = order[static_cast<size_t>(j)];
      assignments.push_back({static_cast<int>(t), static_cast<int>(j), e, p[e] / sum});
    }
  }
  // Group by expert (ascending id, then token): expert u's rows are [begin[u], begin[u+1]).
  std::stable_sort(assignments.begin(), assignments.end(), [](const Assignment& a, const Assignment& b) { return a.expert < b.expert; });
  std::vector<int> unique, begin;
  for (size_t a = 0; a < assignments.size(); ++a) {
    if (a == 0 || assignments[a].expert != assignments[a - 1].expert) {
      unique.push_back(assignments[a].expert);
      begin.push_back(static_cast<int>(a));
    }
  }
  begin.push_back(static_cast<int>(assignments.size()));

  const ExpertLayout& layout = info_.experts[static_cast<size_t>(layer)];
  const quant::ActFormat fmt[2] = {quant::activation_format(layout.gate.type), quant::activation_format(layout.up.type)};
  const quant::ActFormat down_fmt = quant::activation_format(layout.down.type);
  const size_t in_stride[2] = {s.input.stride(fmt[0]), s.input.stride(fmt[1])};
  const size_t hid_stride = quant::activation_bytes(down_fmt, F);
  // Each assignment's input row, gathered so an expert's tokens are contiguous; once when
  // gate and up read the same activation format (the usual case), else once for each.
  const bool shared_input = fmt[1] == fmt[0];
  uint8_t* gathered[2] = {s.gathered_gate.data(), shared_input ? s.gathered_gate.data() : s.gathered_up.data()};
  for (int g = 0; g < (shared_input ? 1 : 2); ++g) {
    const uint8_t* src = s.input.data(fmt[g]);
    for (size_t a = 0; a < assignments.size(); ++a) {
      std::copy_n(src + static_cast<size_t>(assignments[a].token) * in_stride[g], in_stride[g], gathered[g] + a * in_stride[g]);
    }
  }

  experts.begin(layer, unique);
  std::vector<ReadyExpert> ready;
  std::vector<MatmulJob> jobs;
  for (;;) {
    const auto wait_start = std::chrono::steady_clock::now();
    const bool more = experts.next(ready);
    if (timing) timing->expert_wait_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wait_start).count();
    if (!more) break;
    jobs.clear();
    for (const ReadyExpert& r : ready) {
      const size_t a0 = static_cast<size_t>(begin[static_cast<size_t>(r.index)]);
      const int64_t n = begin[static_cast<size_t>(r.index) + 1] - static_cast<int64_t>(a0);
      jobs.push_back({&r.gate, gathered[0] + a0 * in_stride[0], in_stride[0], n, s.gate_out.as<float>() + a0 * F, static_cast<size_t>(F)});
      jobs.push_back({&r.up, gathered[1] + a0 * in_stride[1], in_stride[1], n, s.up_out.as<float>() + a0 * F, static_cast<size_t>(F)});
    }
    run_matmuls(pool, jobs);
    jobs.clear();
    for (const ReadyExpert& r : ready) {
      const int a0 = begin[static_cast<size_t>(r.index)], a1 = begin[static_cast<size_t>(r.index) + 1];
      pool.run(a1 - a0, [&](int64_t i, int) {
        const size_t a = static_cast<size_t>(a0 + i);
        float* g = s.gate_out.as<float>() + a * F;
        ops::swiglu(g, s.up_out.as<float>() + a * F, F, g);
        quant::quantize_activation(down_fmt, g, s.hidden_act.data() + a * hid_stride, F);
      });
      jobs.push_back({&r.down, s.hidden_act.data() + static_cast<size_t>(a0) * hid_stride, hid_stride, a1 - a0,
                      s.down_out.as<float>() + static_cast<size_t>(a0) * E, static_cast<size_t>(E)});
    }
    run_matmuls(pool, jobs);
  }

  // Sum the weighted expert outputs of each token in top-k order (never arrival order).
  std::vector<int> row_of(static_cast<size_t>(T * K));
  for (size_t a = 0; a < assignments.size(); ++a) row_of[static_cast<size_t>(assignments[a].token * K + assignments[a].slot)] = static_cast<int>(a);
  pool.run(T, [&](int64_t t, int) {
    float* out = s.tmp.as<float>() + t * E;
    std::fill_n(out, E, 0.0f);
    for (int64_t j = 0; j < K; ++j) {
      const size_t a = static_cast<size_t>(row_of[static_cast<size_t>(t * K + j)]);
      ops::add_scaled(out, s.down_out.as<float>() + a * E, assignments[a].weight, E);
    }
    ops::add(x + t * E, out, E);
  });
}

void Qwen3Moe::forward(ForwardState& base, ExpertSource& experts, ThreadPool& pool, std::span<const int32_t> tokens, int32_t pos0,
                       bool all_logits, float* logits, ForwardTiming* timing) const {
  auto& s = static_cast<State&>(base);
  const auto start = std::chrono::steady_clock::now();
  const int64_t T = static_cast<int64_t>(tokens.size()), E = h_.n_embd;
  if (T == 0) return;
  if (T > s.max_tokens) fail("internal: batch of {} tokens exceeds the state's {}", T, s.max_tokens);
  if (pos0 < 0 || pos0 + T > s.ctx) fail("context is full: {} positions needed, --ctx is {}", pos0 + T, s.ctx);
  s.positions.resize(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = tokens[static_cast<size_t>(t)];
    if (id < 0 || id >= h_.n_vocab) fail("token id {} is out of range (vocabulary has {} tokens)", id, h_.n_vocab);
    s.positions[static_cast<size_t>(t)] = pos0 + static_cast<int32_t>(t);
    quant::dequantize_row(embd_.type, embd_.row(id), s.x.as<float>() + t * E, E);
  }
  s.rope.compute(s.positions.data(), T);
  if (timing) *timing = {};

  for (int l = 0; l < h_.n_layer; ++l) {
    attention_block(s, layers_[static_cast<size_t>(l)], l, pool, T, pos0);
    moe_block(s, layers_[static_cast<size_t>(l)], l, experts, pool, T, timing);
  }

  const int64_t first = all_logits ? 0 : T - 1, n_out = T - first;
  float* xn = s.xn.as<float>();
  for (int64_t t = 0; t < n_out; ++t) ops::rms_norm(s.x.as<float>() + (first + t) * E, output_norm_, h_.rms_eps, E, xn + t * E);
  s.input.set(xn, n_out, E, static_cast<size_t>(E));
  const quant::ActFormat f = quant::activation_format(output_.type);
  const MatmulJob out[] = {{&output_, s.input.data(f), s.input.stride(f), n_out, logits, static_cast<size_t>(h_.n_vocab)}};
  run_matmuls(pool, out);
  if (timing) timing->total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

uint64_t qwen3moe_state_bytes(const gguf::File& f, const ModelOptions& options, int n_ctx, int max_tokens, int n_threads) {
  const Qwen3MoeHparams h = read_qwen3moe_hparams(f, options);
  uint64_t total = QuantizedInput::bytes_needed(max_tokens, input_cols(h));
  for (const auto& buffer : state_buffers(h, n_ctx, max_tokens, n_threads)) total += Buffer::footprint(buffer.second);
  return total;
}

std::unique_ptr<Model> load_qwen3moe(const gguf::File& f, const ResidentWeights& w, const ModelOptions& options) {
  return std::make_unique<Qwen3Moe>(f, w, options);
}

}  // namespace epq::models
