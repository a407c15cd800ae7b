#include "synth/deepseek2.h"

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

constexpr int kStreams = 4;  // xing4_0's hyper-connection streams

// Tensor order follows llama.cpp's converters: globals first, then per layer the norms,
// MLA, the dense FFN or router, experts and shared expert, and xing4_0's hyper-connections.
std::vector<TensorPlan> plan_tensors(const Options& o) {
  const int64_t E = o.n_embd, H = o.n_head, QH = o.head_dim, R = o.rope_dims, L = o.kv_lora, V = o.v_head;
  const float inv_e = input_scale(E);
  auto inv = input_scale;
  const auto F32 = quant::Type::F32;
  const bool xing = o.arch == Arch::kXing4;
  const int64_t mixes = 2 * kStreams + kStreams * kStreams;

  std::vector<TensorPlan> t;
  add_global_tensors(t, o);
  for (int l = 0; l < o.n_layer + o.nextn; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    auto n = [&blk](const char* what) { return blk + what + ".weight"; };
    t.push_back({n("attn_norm"), F32, {E}, Init::kNormGain, 0.1f, l});
    if (o.q_lora > 0) {
      t.push_back({n("attn_q_a_norm"), F32, {o.q_lora}, Init::kNormGain, 0.1f, l});
      t.push_back({n("attn_q_a"), o.type_attn, {E, o.q_lora}, Init::kGaussian, inv_e, l});
      t.push_back({n("attn_q_b"), o.type_attn, {o.q_lora, H * QH}, Init::kGaussian, inv(o.q_lora), l});
    } else {
      t.push_back({n("attn_q"), o.type_attn, {E, H * QH}, Init::kGaussian, inv_e, l});
    }
    t.push_back({n("attn_kv_a_norm"), F32, {L}, Init::kNormGain, 0.1f, l});
    t.push_back({n("attn_kv_a_mqa"), o.type_attn, {E, L + R}, Init::kGaussian, inv_e, l});
    t.push_back({n("attn_k_b"), o.type_attn, {QH - R, L, H}, Init::kGaussian, inv(QH - R), l});
    t.push_back({n("attn_v_b"), o.type_attn, {L, V, H}, Init::kGaussian, inv(L), l});
    t.push_back({n("attn_output"), o.type_attn, {H * V, E}, Init::kGaussian, residual_scale(o, H * V), l});
    t.push_back({n("ffn_norm"), F32, {E}, Init::kNormGain, 0.1f, l});
    if (l < o.n_dense) add_dense_ffn_tensors(t, o, l, o.n_ff_dense);
    else add_moe_tensors(t, o, l, {.selection_bias = true, .n_ff_shared = o.n_ff_exp});
    if (xing && l < o.n_layer) {
      for (const char* part : {"attn", "ffn"}) {
        const std::string p = std::string("hc_") + part;
        t.push_back({n((p + "_fn").c_str()), F32, {kStreams * E, mixes}, Init::kGaussian, inv(kStreams * E), l});
        t.push_back({n((p + "_base").c_str()), F32, {mixes}, Init::kGaussian, 0.5f, l});
        t.push_back({n((p + "_scale").c_str()), F32, {3}, Init::kNormGain, 0.1f, l});
      }
    }
    if (l >= o.n_layer) {  // the MTP block's own tensors (not run)
      t.push_back({n("nextn.eh_proj"), o.type_attn, {2 * E, E}, Init::kGaussian, inv(2 * E), l});
      t.push_back({n("nextn.enorm"), F32, {E}, Init::kNormGain, 0.1f, l});
      t.push_back({n("nextn.hnorm"), F32, {E}, Init::kNormGain, 0.1f, l});
    }
  }
  return t;
}

void set_metadata(gguf::Writer& w, const Options& o) {
  auto u32 = [](int64_t v) { return Value::integer(ValueType::UINT32, v); };
  auto f32 = [](double v) { return Value::floating(ValueType::FLOAT32, v); };
  const std::string arch = arch_name(o.arch), a = arch + ".";
  set_general_metadata(w, o);
  w.set(a + "block_count", u32(o.n_layer + o.nextn));
  if (o.nextn > 0) w.set(a + "nextn_predict_layers", u32(o.nextn));
  w.set(a + "context_length", u32(o.context_length));
  w.set(a + "embedding_length", u32(o.n_embd));
  if (o.n_dense > 0) w.set(a + "feed_forward_length", u32(o.n_ff_dense));
  w.set(a + "attention.head_count", u32(o.n_head));
  w.set(a + "attention.head_count_kv", u32(1));
  w.set(a + "attention.key_length", u32(o.kv_lora + o.rope_dims));
  w.set(a + "attention.value_length", u32(o.kv_lora));
  w.set(a + "attention.key_length_mla", u32(o.head_dim));
  w.set(a + "attention.value_length_mla", u32(o.v_head));
  if (o.q_lora > 0) w.set(a + "attention.q_lora_rank", u32(o.q_lora));
  w.set(a + "attention.kv_lora_rank", u32(o.kv_lora));
  w.set(a + "attention.layer_norm_rms_epsilon", f32(o.rms_eps));
  w.set(a + "rope.dimension_count", u32(o.rope_dims));
  w.set(a + "rope.freq_base", f32(o.rope_freq_base));
  if (o.yarn_factor > 1) {
    w.set(a + "rope.scaling.type", Value::string("yarn"));
    w.set(a + "rope.scaling.factor", f32(o.yarn_factor));
    w.set(a + "rope.scaling.original_context_length", u32(o.yarn_original_context));
    w.set(a + "rope.scaling.yarn_log_multiplier", f32(0.1));
  }
  w.set(a + "leading_dense_block_count", u32(o.n_dense));
  w.set(a + "expert_count", u32(o.n_expert));
  w.set(a + "expert_used_count", u32(o.n_expert_used));
  w.set(a + "expert_feed_forward_length", u32(o.n_ff_exp));
  w.set(a + "expert_shared_count", u32(1));
  w.set(a + "expert_gating_func", u32(2));
  w.set(a + "expert_weights_norm", Value::integer(ValueType::BOOL, 1));
  w.set(a + "expert_weights_scale", f32(o.expert_scale));
  w.set(a + "expert_group_count", u32(o.expert_groups));
  w.set(a + "expert_group_used_count", u32(o.expert_groups_used));
  if (o.arch == Arch::kXing4) {
    w.set(a + "hyper_connection.count", u32(kStreams));
    w.set(a + "hyper_connection.sinkhorn_iterations", u32(20));
    w.set(a + "hyper_connection.epsilon", f32(1e-6));
  }
  set_tokenizer_metadata(w, o, "qwen2");
}

}  // namespace

void write_deepseek2(const Options& o, const std::string& path, const ProgressFn& on_progress) {
  write_model(o, path, plan_tensors, set_metadata, on_progress);
}

}  // namespace epq::synth
