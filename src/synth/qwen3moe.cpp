#include "synth/qwen3moe.h"

#include <cmath>
#include <vector>

#include "gguf/writer.h"
#include "synth/tokenizer_metadata.h"

namespace epq::synth {
namespace {

using gguf::Value;
using gguf::ValueType;

std::vector<TensorPlan> plan_tensors(const Options& o) {
  const int64_t E = o.n_embd, Q = int64_t{o.n_head} * o.head_dim, KV = int64_t{o.n_head_kv} * o.head_dim;
  const int n_vocab = vocab_size(o);
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

  set_tokenizer_metadata(w, o, "qwen2");
}

}  // namespace

void write_qwen3moe(const Options& o, const std::string& path, const ProgressFn& on_progress) {
  write_model(o, path, plan_tensors, set_metadata, on_progress);
}

}  // namespace epq::synth
