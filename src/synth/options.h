#pragma once
// What `epq synth` builds: the architecture (qwen3moe, the Gated DeltaNet hybrid
// qwen35moe, laguna with its sliding-window layers, the MLA models deepseek2 and
// xing4_0), its shape, the quant type of each tensor role, and the random seed.
// Presets give named starting points, per architecture.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quant/types.h"

namespace epq::synth {

enum class Arch { kQwen3Moe, kQwen35Moe, kLaguna, kDeepseek2, kXing4 };

const char* arch_name(Arch arch);  // the general.architecture string
std::optional<Arch> arch_from_name(const std::string& name);

struct Options {
  Arch arch = Arch::kQwen3Moe;
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
  int n_vocab = 0;  // > the learned vocabulary: pad it to this many tokens (see vocab.h)
  bool tied_output = false;  // no output.weight: the lm head reuses token_embd
  // Rope scaling written to the metadata (yarn when factor > 1).
  double yarn_factor = 0;
  int yarn_original_context = 0;

  // qwen35moe and laguna: the shared expert and partial rotary.
  int n_ff_shexp = 256;               // shared expert feed-forward length
  int rope_dims = 16;                 // n_rot: rotated dims of each full-attention head
  // qwen35moe only: the hybrid layer stack.
  int full_attention_interval = 4;    // layer il is full attention iff (il+1) % interval == 0
  int ssm_conv_kernel = 4;            // K, the causal conv width
  int ssm_state = 64;                 // Dk = Dv of the linear-attention heads
  int ssm_groups = 2;                 // Hk, key/query heads
  int ssm_heads = 4;                  // Hv, value heads (ssm.time_step_rank)
  // laguna only: sliding-window layers (il % 4 != 0).
  int sliding_window = 16;            // 0: every layer full attention
  int n_head_swa = 6;                 // query heads of the sliding-window layers (--heads: full layers)
  bool gate_per_element_full = true;  // full layers' softplus gate per element, else per head
  // laguna, deepseek2, xing4_0: leading dense layers.
  int n_dense = 1;                    // leading dense layers
  int n_ff_dense = 512;               // their feed-forward length
  // deepseek2, xing4_0: MLA (--heads query heads of head_dim = nope + rope_dims), groups, MTP.
  int q_lora = 64;                    // 0: a plain attn_q
  int kv_lora = 64;
  int v_head = 32;                    // value dims per head
  int expert_groups = 1, expert_groups_used = 1;
  double expert_scale = 2.0;          // expert_weights_scale
  int nextn = 0;                      // trailing MTP blocks (not run)

  quant::Type type_expert = quant::Type::Q4_K;       // ffn_gate_exps, ffn_up_exps
  quant::Type type_expert_down = quant::Type::Q6_K;  // ffn_down_exps
  quant::Type type_attn = quant::Type::Q8_0;         // attn_q, attn_k, attn_output; qwen35moe:
                                                     // also attn_qkv, attn_gate, ssm_alpha/beta/out
  quant::Type type_attn_v = quant::Type::Q8_0;       // attn_v
  quant::Type type_embd = quant::Type::Q4_K;         // token_embd
  quant::Type type_output = quant::Type::Q6_K;       // output
  quant::Type type_router = quant::Type::F32;        // ffn_gate_inp
  quant::Type type_shexp = quant::Type::Q8_0;        // ffn_{gate,up,down}_shexp; laguna: and the dense FFN
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
  // qwen35moe: whether layer il is a Gated DeltaNet (linear attention) layer.
  bool recurrent(int layer) const { return (layer + 1) % full_attention_interval != 0; }
  bool mla() const { return arch == Arch::kDeepseek2 || arch == Arch::kXing4; }
  // laguna: whether layer il is a sliding-window layer (llama.cpp's pattern 4).
  bool sliding(int layer) const { return sliding_window > 0 && layer % 4 != 0; }
};

// Named presets per architecture. qwen3moe: tiny, small, qwen3-30b-a3b. qwen35moe: tiny,
// small, qwen3.6-35b-a3b. laguna: tiny, small, laguna-s-2.1. deepseek2: tiny, small,
// deepseek-v3. xing4_0: tiny, small, xing4.0-29b-a4b. Returns nullopt for an unknown name.
std::optional<Options> preset(Arch arch, const std::string& name);
std::vector<std::string> preset_names(Arch arch);
// The qwen3moe presets.
inline std::optional<Options> preset(const std::string& name) { return preset(Arch::kQwen3Moe, name); }

// Throws an Error naming the first problem (e.g. a row length not divisible by a block).
void validate(const Options& options);

}  // namespace epq::synth
