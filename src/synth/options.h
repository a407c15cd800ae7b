#pragma once
// What `epq synth` builds: the shape of a qwen3moe model, the quant type of each tensor
// role, and the random seed. Presets give named starting points.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quant/types.h"

namespace epq::synth {

struct Options {
  std::string name = "epq-synthetic";
  int n_layer = 4;
  int n_expert = 8;
  int n_expert_used = 2;
  int n_embd = 256;
  int n_head = 4;
  int n_head_kv = 2;
  int head_dim = 64;
  int n_ff_exp = 256;
  int context_length = 4096;
  double rope_freq_base = 1000000.0;
  double rms_eps = 1e-6;
  int n_merges = 400;
  bool tied_output = false;  // no output.weight: the lm head reuses token_embd
  // Rope scaling written to the metadata (yarn when factor > 1).
  double yarn_factor = 0;
  int yarn_original_context = 0;

  quant::Type type_expert = quant::Type::Q4_K;       // ffn_gate_exps, ffn_up_exps
  quant::Type type_expert_down = quant::Type::Q6_K;  // ffn_down_exps
  quant::Type type_attn = quant::Type::Q8_0;         // attn_q, attn_k, attn_output
  quant::Type type_attn_v = quant::Type::Q8_0;       // attn_v
  quant::Type type_embd = quant::Type::Q4_K;         // token_embd
  quant::Type type_output = quant::Type::Q6_K;       // output
  quant::Type type_router = quant::Type::F32;        // ffn_gate_inp
  // Expert type of the last tail_layers layers (all three matrices), for mixed-size models.
  std::optional<quant::Type> type_tail_experts;
  int tail_layers = 0;

  double zipf = 0;  // > 0 skews expert popularity: the expert of rank r gets ~ (r+1)^-zipf
  uint64_t seed = 1;
  int threads = 0;  // 0: physical cores

  quant::Type expert_type(int layer, bool down) const {
    if (type_tail_experts && layer >= n_layer - tail_layers) return *type_tail_experts;
    return down ? type_expert_down : type_expert;
  }
};

// Named presets: tiny, small, qwen3-30b-a3b. Returns nullopt for an unknown name.
std::optional<Options> preset(const std::string& name);
std::vector<std::string> preset_names();

// Throws an Error naming the first problem (e.g. a row length not divisible by a block).
void validate(const Options& options);

}  // namespace epq::synth
