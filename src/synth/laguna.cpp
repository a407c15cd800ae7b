#include "synth/laguna.h"

#include <cmath>
#include <vector>

#include "gguf/writer.h"
#include "synth/general_metadata.h"
#include "synth/layer_tensors.h"
#include "synth/tokenizer_metadata.h"

namespace epq::synth {
namespace {

using gguf::Value;
using gguf::ValueType;

int heads(const Options& o, int layer) { return o.sliding(layer) ? o.n_head_swa : o.n_head; }

// Tensor order follows llama.cpp's converter: globals first, then per layer the norms and
// attention, then the dense FFN or the router, routed experts and shared expert.
std::vector<TensorPlan> plan_tensors(const Options& o) {
  const int64_t E = o.n_embd, D = o.head_dim, KV = int64_t{o.n_head_kv} * D;
  const float inv_e = input_scale(E);
  const auto F32 = quant::Type::F32;

  std::vector<TensorPlan> t;
  add_global_tensors(t, o);
  for (int l = 0; l < o.n_layer; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    auto n = [&blk](const char* what) { return blk + what + ".weight"; };
    const int64_t Q = int64_t{heads(o, l)} * D;
    const int64_t gate = o.gate_per_element_full && !o.sliding(l) ? Q : heads(o, l);
    t.push_back({n("attn_norm"), F32, {E}, Init::kNormGain, 0.1f, l});
    t.push_back({n("attn_q"), o.type_attn, {E, Q}, Init::kGaussian, inv_e, l});
    t.push_back({n("attn_k"), o.type_attn, {E, KV}, Init::kGaussian, inv_e, l});
    t.push_back({n("attn_v"), o.type_attn_v, {E, KV}, Init::kGaussian, inv_e, l});
    t.push_back({n("attn_output"), o.type_attn, {Q, E}, Init::kGaussian, residual_scale(o, Q), l});
    t.push_back({n("attn_q_norm"), F32, {D}, Init::kNormGain, 0.1f, l});
    t.push_back({n("attn_k_norm"), F32, {D}, Init::kNormGain, 0.1f, l});
    t.push_back({n("attn_gate"), o.type_attn, {E, gate}, Init::kGaussian, inv_e, l});
    t.push_back({n("ffn_norm"), F32, {E}, Init::kNormGain, 0.1f, l});
    if (l < o.n_dense) add_dense_ffn_tensors(t, o, l, o.n_ff_dense);
    else add_moe_tensors(t, o, l, {.selection_bias = true, .n_ff_shared = o.n_ff_shexp});
  }
  return t;
}

void set_metadata(gguf::Writer& w, const Options& o) {
  auto u32 = [](int64_t v) { return Value::integer(ValueType::UINT32, v); };
  auto f32 = [](double v) { return Value::floating(ValueType::FLOAT32, v); };
  const std::string a = "laguna.";
  std::vector<int64_t> head_count;
  for (int l = 0; l < o.n_layer; ++l) head_count.push_back(heads(o, l));
  set_general_metadata(w, o);
  w.set(a + "context_length", u32(o.context_length));
  w.set(a + "embedding_length", u32(o.n_embd));
  w.set(a + "block_count", u32(o.n_layer));
  w.set(a + "attention.head_count", Value::int_array(ValueType::INT32, head_count));
  w.set(a + "attention.head_count_kv", u32(o.n_head_kv));
  w.set(a + "attention.key_length", u32(o.head_dim));
  w.set(a + "attention.value_length", u32(o.head_dim));
  w.set(a + "attention.layer_norm_rms_epsilon", f32(o.rms_eps));
  w.set(a + "leading_dense_block_count", u32(o.n_dense));
  if (o.n_dense > 0) w.set(a + "feed_forward_length", u32(o.n_ff_dense));
  w.set(a + "expert_count", u32(o.n_expert));
  w.set(a + "expert_used_count", u32(o.n_expert_used));
  w.set(a + "expert_feed_forward_length", u32(o.n_ff_exp));
  w.set(a + "expert_shared_feed_forward_length", u32(o.n_ff_shexp));
  w.set(a + "expert_gating_func", u32(2));
  w.set(a + "expert_weights_norm", Value::integer(ValueType::BOOL, 1));
  w.set(a + "expert_weights_scale", f32(2.5));
  w.set(a + "rope.freq_base", f32(o.rope_freq_base));
  w.set(a + "rope.dimension_count", u32(o.rope_dims));
  if (o.yarn_factor > 1) {
    w.set(a + "rope.scaling.type", Value::string("yarn"));
    w.set(a + "rope.scaling.factor", f32(o.yarn_factor));
    w.set(a + "rope.scaling.original_context_length", u32(o.yarn_original_context));
  }
  if (o.sliding_window > 0) {
    w.set(a + "attention.sliding_window", u32(o.sliding_window));
    w.set(a + "rope.freq_base_swa", f32(10000.0));
    w.set(a + "rope.dimension_count_swa", u32(o.head_dim));
  }
  set_tokenizer_metadata(w, o, "laguna");
}

}  // namespace

void write_laguna(const Options& o, const std::string& path, const ProgressFn& on_progress) {
  write_model(o, path, plan_tensors, set_metadata, on_progress);
}

}  // namespace epq::synth
