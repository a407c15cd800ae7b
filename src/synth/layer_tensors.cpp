#include "synth/layer_tensors.h"

#include <cmath>

#include "synth/tokenizer_metadata.h"

namespace epq::synth {
namespace {

std::string weight(int l, const char* what) { return "blk." + std::to_string(l) + "." + what + ".weight"; }

}  // namespace

float input_scale(int64_t fan_in) { return 1.0f / std::sqrt(static_cast<float>(fan_in)); }

float residual_scale(const Options& o, int64_t fan_in) {
  const float residual = 1.0f / std::sqrt(2.0f * static_cast<float>(o.n_layer));
  return residual / std::sqrt(static_cast<float>(fan_in));
}

void add_global_tensors(std::vector<TensorPlan>& t, const Options& o) {
  const int64_t E = o.n_embd;
  t.push_back({"token_embd.weight", o.type_embd, {E, vocab_size(o)}, Init::kEmbedding, 1.0f});
  t.push_back({"output_norm.weight", quant::Type::F32, {E}, Init::kNormGain, 0.1f});
  if (!o.tied_output) t.push_back({"output.weight", o.type_output, {E, vocab_size(o)}, Init::kGaussian, 3.0f * input_scale(E)});
}

void add_moe_tensors(std::vector<TensorPlan>& t, const Options& o, int l, const MoeTensors& m) {
  const int64_t E = o.n_embd, F = o.n_ff_exp, N = o.n_expert, S = m.n_ff_shared;
  const float in = input_scale(E);
  t.push_back({weight(l, "ffn_gate_inp"), o.type_router, {E, N}, Init::kRouter, in, l});
  if (m.selection_bias) t.push_back({"blk." + std::to_string(l) + ".exp_probs_b.bias", quant::Type::F32, {N}, Init::kGaussian, 0.05f, l});
  t.push_back({weight(l, "ffn_gate_exps"), o.expert_type(l, false), {E, F, N}, Init::kGaussian, in, l});
  t.push_back({weight(l, "ffn_up_exps"), o.expert_type(l, false), {E, F, N}, Init::kGaussian, in, l});
  t.push_back({weight(l, "ffn_down_exps"), o.expert_type(l, true), {F, E, N}, Init::kGaussian, residual_scale(o, F), l});
  if (S == 0) return;
  if (m.gated_shared) t.push_back({weight(l, "ffn_gate_inp_shexp"), quant::Type::F32, {E}, Init::kGaussian, in, l});
  t.push_back({weight(l, "ffn_gate_shexp"), o.type_shexp, {E, S}, Init::kGaussian, in, l});
  t.push_back({weight(l, "ffn_up_shexp"), o.type_shexp, {E, S}, Init::kGaussian, in, l});
  t.push_back({weight(l, "ffn_down_shexp"), o.type_shexp, {S, E}, Init::kGaussian, residual_scale(o, S), l});
}

void add_dense_ffn_tensors(std::vector<TensorPlan>& t, const Options& o, int l, int64_t n_ff) {
  const int64_t E = o.n_embd;
  t.push_back({weight(l, "ffn_gate"), o.type_shexp, {E, n_ff}, Init::kGaussian, input_scale(E), l});
  t.push_back({weight(l, "ffn_up"), o.type_shexp, {E, n_ff}, Init::kGaussian, input_scale(E), l});
  t.push_back({weight(l, "ffn_down"), o.type_shexp, {n_ff, E}, Init::kGaussian, residual_scale(o, n_ff), l});
}

}  // namespace epq::synth
