#include "synth/qwen3moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/thread_pool.h"
#include "gguf/writer.h"
#include "quant/reference.h"
#include "synth/random.h"
#include "synth/vocab.h"
#include "util/error.h"

namespace epq::synth {
namespace {

using gguf::Value;
using gguf::ValueType;

// How the values of a tensor are drawn.
enum class Init {
  kGaussian,   // N(0, scale^2)
  kNormGain,   // 1 + scale * N(0, 1): RMSNorm weights
  kEmbedding,  // N(0, 1), plus the popularity direction when zipf > 0
  kRouter,     // N(0, scale^2), plus a per-expert popularity offset when zipf > 0
};

struct TensorPlan {
  std::string name;
  quant::Type type;
  std::vector<int64_t> dims;
  Init init;
  float scale;
  int layer = -1;
};

std::vector<TensorPlan> plan_tensors(const Options& o) {
  const int64_t E = o.n_embd, Q = int64_t{o.n_head} * o.head_dim, KV = int64_t{o.n_head_kv} * o.head_dim;
  const int n_vocab = static_cast<int>(make_vocab(o.n_merges).tokens.size());
  const float inv_e = 1.0f / std::sqrt(static_cast<float>(E));
  std::vector<TensorPlan> t;
  t.push_back({"token_embd.weight", o.type_embd, {E, n_vocab}, Init::kEmbedding, 1.0f});
  for (int l = 0; l < o.n_layer; ++l) {
    auto n = [l](const char* what) { return "blk." + std::to_string(l) + "." + what + ".weight"; };
    // The two projections that write into the residual stream are scaled down by
    // sqrt(2 * layers), so that the token's own embedding stays a large part of the
    // stream through every layer: without it, deep random models forget their input and
    // predict the same token everywhere.
    const float residual = 1.0f / std::sqrt(2.0f * static_cast<float>(o.n_layer));
    const float inv_q = residual / std::sqrt(static_cast<float>(Q));
    const float inv_ff = residual / std::sqrt(static_cast<float>(o.n_ff_exp));
    t.push_back({n("attn_norm"), quant::Type::F32, {E}, Init::kNormGain, 0.1f, l});
    t.push_back({n("attn_q"), o.type_attn, {E, Q}, Init::kGaussian, inv_e, l});
    t.push_back({n("attn_k"), o.type_attn, {E, KV}, Init::kGaussian, inv_e, l});
    t.push_back({n("attn_v"), o.type_attn_v, {E, KV}, Init::kGaussian, inv_e, l});
    t.push_back({n("attn_output"), o.type_attn, {Q, E}, Init::kGaussian, inv_q, l});
    t.push_back({n("attn_q_norm"), quant::Type::F32, {o.head_dim}, Init::kNormGain, 0.1f, l});
    t.push_back({n("attn_k_norm"), quant::Type::F32, {o.head_dim}, Init::kNormGain, 0.1f, l});
    t.push_back({n("ffn_norm"), quant::Type::F32, {E}, Init::kNormGain, 0.1f, l});
    t.push_back({n("ffn_gate_inp"), o.type_router, {E, o.n_expert}, Init::kRouter, inv_e, l});
    t.push_back({n("ffn_gate_exps"), o.expert_type(l, false), {E, o.n_ff_exp, o.n_expert}, Init::kGaussian, inv_e, l});
    t.push_back({n("ffn_up_exps"), o.expert_type(l, false), {E, o.n_ff_exp, o.n_expert}, Init::kGaussian, inv_e, l});
    t.push_back({n("ffn_down_exps"), o.expert_type(l, true), {o.n_ff_exp, E, o.n_expert}, Init::kGaussian, inv_ff, l});
  }
  t.push_back({"output_norm.weight", quant::Type::F32, {E}, Init::kNormGain, 0.1f});
  if (!o.tied_output) t.push_back({"output.weight", o.type_output, {E, n_vocab}, Init::kGaussian, 3.0f * inv_e});
  return t;
}

void set_metadata(gguf::Writer& w, const Options& o) {
  auto u32 = [](int64_t v) { return Value::integer(ValueType::UINT32, v); };
  auto f32 = [](double v) { return Value::floating(ValueType::FLOAT32, v); };
  const std::string a = "qwen3moe.";
  w.set("general.architecture", Value::string("qwen3moe"));
  w.set("general.name", Value::string(o.name));
  w.set("general.quantization_version", u32(2));
  w.set(a + "context_length", u32(o.context_length));
  w.set(a + "embedding_length", u32(o.n_embd));
  w.set(a + "block_count", u32(o.n_layer));
  w.set(a + "feed_forward_length", u32(int64_t{o.n_ff_exp} * o.n_expert_used));
  w.set(a + "expert_feed_forward_length", u32(o.n_ff_exp));
  w.set(a + "attention.head_count", u32(o.n_head));
  w.set(a + "attention.head_count_kv", u32(o.n_head_kv));
  w.set(a + "attention.key_length", u32(o.head_dim));
  w.set(a + "attention.value_length", u32(o.head_dim));
  w.set(a + "attention.layer_norm_rms_epsilon", f32(o.rms_eps));
  w.set(a + "rope.freq_base", f32(o.rope_freq_base));
  w.set(a + "expert_count", u32(o.n_expert));
  w.set(a + "expert_used_count", u32(o.n_expert_used));
  if (o.yarn_factor > 1) {
    w.set(a + "rope.scaling.type", Value::string("yarn"));
    w.set(a + "rope.scaling.factor", f32(o.yarn_factor));
    w.set(a + "rope.scaling.original_context_length", u32(o.yarn_original_context));
  }

  Vocab v = make_vocab(o.n_merges);
  std::vector<int64_t> types(v.types.begin(), v.types.end());
  w.set("tokenizer.ggml.model", Value::string("gpt2"));
  w.set("tokenizer.ggml.pre", Value::string("qwen2"));
  w.set("tokenizer.ggml.tokens", Value::string_array(std::move(v.tokens)));
  w.set("tokenizer.ggml.token_type", Value::int_array(ValueType::INT32, std::move(types)));
  w.set("tokenizer.ggml.merges", Value::string_array(std::move(v.merges)));
  w.set("tokenizer.ggml.eos_token_id", u32(v.im_end_id));
  w.set("tokenizer.ggml.padding_token_id", u32(v.endoftext_id));
  w.set("tokenizer.ggml.bos_token_id", u32(v.endoftext_id));
  w.set("tokenizer.ggml.add_bos_token", Value::integer(ValueType::BOOL, 0));
  w.set("tokenizer.chat_template", Value::string(chatml_template()));
}

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

const char* chatml_template() {
  return "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
         "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
         "{% endif %}";
}

void write_qwen3moe(const Options& o, const std::string& path,
                    const std::function<void(const Progress&)>& on_progress) {
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
