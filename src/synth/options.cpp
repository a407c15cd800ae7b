#include "synth/options.h"

#include "synth/vocab.h"
#include "util/error.h"

namespace epq::synth {
namespace {

void positive(const char* what, int v) {
  if (v <= 0) fail("synth: {} must be positive, got {}", what, v);
}

}  // namespace

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::kQwen35Moe: return "qwen35moe";
    case Arch::kLaguna: return "laguna";
    case Arch::kDeepseek2: return "deepseek2";
    case Arch::kXing4: return "xing4_0";
    default: return "qwen3moe";
  }
}

constexpr Arch kArchs[] = {Arch::kQwen3Moe, Arch::kQwen35Moe, Arch::kLaguna, Arch::kDeepseek2, Arch::kXing4};

std::optional<Arch> arch_from_name(const std::string& name) {
  for (Arch a : kArchs) {
    if (name == arch_name(a)) return a;
  }
  return std::nullopt;
}

namespace {

std::optional<Options> qwen3moe_preset(const std::string& name) {
  Options o;
  if (name == "tiny") {
    o.name = "epq-tiny";  // defaults: 4 layers x 8 experts, a few MB
    return o;
  }
  if (name == "small") {
    o.name = "epq-small";
    o.n_layer = 16;
    o.n_expert = 64;
    o.n_expert_used = 8;
    o.n_embd = 1024;
    o.n_head = 16;
    o.n_head_kv = 4;
    o.head_dim = 64;
    o.n_ff_exp = 512;
    return o;
  }
  if (name == "qwen3-30b-a3b") {
    o.name = "epq-qwen3-30b-a3b-synthetic";
    o.n_layer = 48;
    o.n_expert = 128;
    o.n_expert_used = 8;
    o.n_embd = 2048;
    o.n_head = 32;
    o.n_head_kv = 4;
    o.head_dim = 128;
    o.n_ff_exp = 768;
    o.context_length = 40960;
    o.type_expert = quant::Type::Q4_K;
    o.type_expert_down = quant::Type::Q4_K;
    o.type_attn = quant::Type::Q4_K;
    o.type_attn_v = quant::Type::Q6_K;
    o.type_embd = quant::Type::Q4_K;
    o.type_output = quant::Type::Q6_K;
    return o;
  }
  return std::nullopt;
}

// Every qwen35moe preset keeps the real model's proportions: interval 4 (three Gated
// DeltaNet layers, then one full-attention layer), rope over a quarter of each head,
// twice as many value heads as key heads, freq_base 1e7.
std::optional<Options> qwen35moe_preset(const std::string& name) {
  Options o;
  o.arch = Arch::kQwen35Moe;
  o.rope_freq_base = 10000000.0;
  o.full_attention_interval = 4;
  o.ssm_conv_kernel = 4;
  if (name == "tiny") {  // 8 layers (full attention at 3 and 7) x 16 experts, about 20 MB
    o.name = "epq-qwen35moe-tiny";
    o.n_layer = 8;
    o.n_expert = 16;
    o.n_expert_used = 4;
    o.n_embd = 256;
    o.n_head = 4;
    o.n_head_kv = 2;
    o.head_dim = 64;
    o.rope_dims = 16;
    o.n_ff_exp = 256;
    o.n_ff_shexp = 256;
    o.ssm_state = 64;
    o.ssm_groups = 2;
    o.ssm_heads = 4;
    o.context_length = 4096;
    return o;
  }
  if (name == "small") {  // 12 layers x 64 experts, about 500 MB
    o.name = "epq-qwen35moe-small";
    o.n_layer = 12;
    o.n_expert = 64;
    o.n_expert_used = 8;
    o.n_embd = 1024;
    o.n_head = 8;
    o.n_head_kv = 2;
    o.head_dim = 128;
    o.rope_dims = 32;
    o.n_ff_exp = 256;
    o.n_ff_shexp = 256;
    o.ssm_state = 128;
    o.ssm_groups = 8;
    o.ssm_heads = 16;
    o.context_length = 32768;
    return o;
  }
  if (name == "qwen3.6-35b-a3b") {  // the real shape: 40 layers x 256 experts, about 23 GB
    o.name = "epq-qwen3.6-35b-a3b-synthetic";
    o.n_layer = 40;
    o.n_expert = 256;
    o.n_expert_used = 8;
    o.n_embd = 2048;
    o.n_head = 16;
    o.n_head_kv = 2;
    o.head_dim = 256;
    o.rope_dims = 64;
    o.n_ff_exp = 512;
    o.n_ff_shexp = 512;
    o.ssm_state = 128;
    o.ssm_groups = 16;
    o.ssm_heads = 32;
    o.context_length = 262144;
    o.n_vocab = 248320;  // the learned vocabulary padded to the real size (see vocab.h)
    o.type_expert = quant::Type::Q4_K;
    o.type_expert_down = quant::Type::Q6_K;
    o.type_attn = quant::Type::Q8_0;
    o.type_attn_v = quant::Type::Q8_0;
    o.type_shexp = quant::Type::Q8_0;
    o.type_embd = quant::Type::Q4_K;
    o.type_output = quant::Type::Q6_K;
    return o;
  }
  return std::nullopt;
}

// laguna presets: a dense first layer, sliding-window layers (il % 4 != 0) with more
// heads and full rotary (base 1e4), full layers with partial rotary and YaRN, sigmoid
// routing scaled by 2.5, an ungated shared expert, and BF16 experts in the last layers.
std::optional<Options> laguna_preset(const std::string& name) {
  Options o;
  o.arch = Arch::kLaguna;
  o.rope_freq_base = 500000.0;
  o.type_tail_experts = quant::Type::BF16;
  o.type_shexp = quant::Type::F16;
  if (name == "tiny") {  // the shape of llama.cpp's reference file: 6 layers x 32 experts, about 20 MB
    o.name = "epq-laguna-tiny";
    o.n_layer = 6;
    o.n_expert = 32;
    o.n_expert_used = 10;
    o.n_embd = 256;
    o.n_head = 4;
    o.n_head_swa = 6;
    o.n_head_kv = 2;
    o.head_dim = 64;
    o.rope_dims = 32;
    o.sliding_window = 16;
    o.n_ff_exp = 128;
    o.n_ff_shexp = 128;
    o.n_ff_dense = 512;
    o.type_expert_down = quant::Type::Q8_0;  // rows of 128
    o.tail_layers = 1;
    o.context_length = 32768;
    o.yarn_factor = 8;
    o.yarn_original_context = 4096;
    return o;
  }
  if (name == "small") {  // 12 layers x 64 experts, the last 2 BF16, about 500 MB
    o.name = "epq-laguna-small";
    o.n_layer = 12;
    o.n_expert = 64;
    o.n_expert_used = 8;
    o.n_embd = 1024;
    o.n_head = 8;
    o.n_head_swa = 12;
    o.n_head_kv = 2;
    o.head_dim = 128;
    o.rope_dims = 64;
    o.sliding_window = 128;
    o.n_ff_exp = 256;
    o.n_ff_shexp = 256;
    o.n_ff_dense = 2048;
    o.tail_layers = 2;
    o.context_length = 131072;
    o.yarn_factor = 8;
    o.yarn_original_context = 16384;
    return o;
  }
  if (name == "laguna-s-2.1") {
    // The real expert shape (seed report 000): 48 layers, layer 0 dense, 256 experts top-10
    // of 1024, Q4_K in layers 1-39 and BF16 in 40-47, about 96 GB. The attention shape is
    // Laguna-XS.2's (llama.cpp's): 48 heads on full and 64 on sliding-window layers, 8 KV
    // heads of 128, rotary 64 of 128 on full layers; the window (512), the YaRN factor
    // and the vocabulary size are assumptions that leave the expert bytes unchanged.
    o.name = "epq-laguna-s-2.1-synthetic";
    o.n_layer = 48;
    o.n_expert = 256;
    o.n_expert_used = 10;
    o.n_embd = 3072;
    o.n_head = 48;
    o.n_head_swa = 64;
    o.n_head_kv = 8;
    o.head_dim = 128;
    o.rope_dims = 64;
    o.sliding_window = 512;
    o.n_ff_exp = 1024;
    o.n_ff_shexp = 1024;
    o.n_ff_dense = 8192;
    o.gate_per_element_full = false;
    o.tail_layers = 8;
    o.context_length = 1048576;
    o.yarn_factor = 32;
    o.yarn_original_context = 32768;
    o.n_vocab = 100352;
    o.type_expert = quant::Type::Q4_K;
    o.type_expert_down = quant::Type::Q4_K;
    o.type_attn = quant::Type::Q4_K;
    o.type_attn_v = quant::Type::Q6_K;
    o.type_shexp = quant::Type::Q8_0;
    o.type_embd = quant::Type::Q4_K;
    o.type_output = quant::Type::Q6_K;
    return o;
  }
  return std::nullopt;
}

// MLA presets (deepseek2, xing4_0): q_lora and kv_lora ranks, a head of 128 + 64 (scaled
// down in tiny and small), sigmoid routing with a selection bias, scaled; an ungated
// shared expert; YaRN with DeepSeek's log multiplier. xing4_0 adds four hyper-connection
// streams and one MTP block.
std::optional<Options> mla_preset(Arch arch, const std::string& name) {
  Options o;
  o.arch = arch;
  const bool xing = arch == Arch::kXing4;
  o.rope_freq_base = 10000.0;
  o.n_head_kv = 1;
  o.nextn = xing ? 1 : 0;
  o.n_dense = xing ? 2 : 1;
  o.type_shexp = quant::Type::Q8_0;
  if (name == "tiny") {  // the shape of llama.cpp's reference files, a few MB
    o.name = xing ? "epq-xing4_0-tiny" : "epq-deepseek2-tiny";
    o.n_layer = xing ? 4 : 3;
    o.n_expert = 8;
    o.n_expert_used = 2;
    o.n_embd = 256;
    o.n_head = 4;
    o.head_dim = 48;
    o.rope_dims = 16;
    o.q_lora = 64;
    o.kv_lora = 64;
    o.v_head = 32;
    o.n_ff_exp = 128;
    o.n_ff_dense = 512;
    o.expert_groups = xing ? 1 : 2;
    o.type_expert_down = quant::Type::Q8_0;  // rows of 128
    o.context_length = 4096;
    o.yarn_factor = 16;
    o.yarn_original_context = 256;
    return o;
  }
  if (name == "small") {  // 8 layers x 64 experts, a few hundred MB
    o.name = xing ? "epq-xing4_0-small" : "epq-deepseek2-small";
    o.n_layer = 8;
    o.n_expert = 64;
    o.n_expert_used = xing ? 4 : 6;
    o.n_embd = 1024;
    o.n_head = 16;
    o.head_dim = 96;
    o.rope_dims = 32;
    o.q_lora = 384;
    o.kv_lora = 256;
    o.v_head = 64;
    o.n_ff_exp = 256;
    o.n_ff_dense = 2048;
    o.expert_groups = xing ? 1 : 8;
    o.context_length = 32768;
    o.yarn_factor = 8;
    o.yarn_original_context = 4096;
    return o;
  }
  if (xing && name == "xing4.0-29b-a4b") {  // the real shape (seed report 002), IQ4_NL, about 19 GiB
    o.name = "epq-xing4.0-29b-a4b-synthetic";
    o.n_layer = 40;
    o.n_expert = 64;
    o.n_expert_used = 4;
    o.n_embd = 3584;
    o.n_head = 32;
    o.head_dim = 192;
    o.rope_dims = 64;
    o.q_lora = 768;
    o.kv_lora = 512;
    o.v_head = 128;
    o.n_ff_exp = 1024;
    o.n_ff_dense = 9216;
    o.context_length = 262144;
    o.yarn_factor = 64;
    o.yarn_original_context = 4096;
    o.n_vocab = 131072;
    for (quant::Type* t : {&o.type_expert, &o.type_expert_down, &o.type_attn, &o.type_attn_v, &o.type_shexp, &o.type_embd, &o.type_output}) {
      *t = quant::Type::IQ4_NL;
    }
    return o;
  }
  if (!xing && name == "deepseek-v3") {  // DeepSeek-V3/R1's shape (61 layers, about 380 GB): cut it with --layers
    o.name = "epq-deepseek-v3-synthetic";
    o.n_layer = 61;
    o.n_expert = 256;
    o.n_expert_used = 8;
    o.n_embd = 7168;
    o.n_head = 128;
    o.head_dim = 192;
    o.rope_dims = 64;
    o.q_lora = 1536;
    o.kv_lora = 512;
    o.v_head = 128;
    o.n_ff_exp = 2048;
    o.n_dense = 3;
    o.n_ff_dense = 18432;
    o.expert_groups = 8;
    o.expert_groups_used = 4;
    o.expert_scale = 2.5;
    o.context_length = 163840;
    o.yarn_factor = 40;
    o.yarn_original_context = 4096;
    o.n_vocab = 129280;
    o.type_expert = quant::Type::Q4_K;
    o.type_expert_down = quant::Type::Q4_K;
    o.type_attn = quant::Type::Q8_0;
    o.type_attn_v = quant::Type::Q8_0;
    o.type_embd = quant::Type::Q4_K;
    o.type_output = quant::Type::Q6_K;
    return o;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Options> preset(Arch arch, const std::string& name) {
  switch (arch) {
    case Arch::kQwen35Moe: return qwen35moe_preset(name);
    case Arch::kLaguna: return laguna_preset(name);
    case Arch::kDeepseek2:
    case Arch::kXing4: return mla_preset(arch, name);
    default: return qwen3moe_preset(name);
  }
}

std::vector<std::string> preset_names(Arch arch) {
  switch (arch) {
    case Arch::kQwen35Moe: return {"tiny", "small", "qwen3.6-35b-a3b"};
    case Arch::kLaguna: return {"tiny", "small", "laguna-s-2.1"};
    case Arch::kDeepseek2: return {"tiny", "small", "deepseek-v3"};
    case Arch::kXing4: return {"tiny", "small", "xing4.0-29b-a4b"};
    default: return {"tiny", "small", "qwen3-30b-a3b"};
  }
}

namespace {

template <typename Fits>
void validate_qwen35moe(const Options& o, const Fits& fits) {
  positive("--shared-expert-ffn", o.n_ff_shexp);
  positive("--full-attention-interval", o.full_attention_interval);
  positive("--rope-dims", o.rope_dims);
  positive("--ssm-conv-kernel", o.ssm_conv_kernel);
  positive("--ssm-state", o.ssm_state);
  positive("--ssm-groups", o.ssm_groups);
  positive("--ssm-heads", o.ssm_heads);
  if (o.yarn_factor > 0) fail("synth: --yarn-factor does not apply to --arch qwen35moe (it has no rope scaling)");
  if (o.rope_dims % 2 != 0 || o.rope_dims > o.head_dim) {
    fail("synth: --rope-dims must be even and at most --head-dim {}, got {}", o.head_dim, o.rope_dims);
  }
  if (o.ssm_heads % o.ssm_groups != 0) {
    fail("synth: --ssm-heads {} is not a multiple of --ssm-groups {}", o.ssm_heads, o.ssm_groups);
  }
  if (o.ssm_conv_kernel > 64 || int64_t{o.ssm_heads} * o.ssm_state > (1 << 20) || o.n_ff_shexp > (1 << 20) ||
      o.full_attention_interval > (1 << 20)) {
    fail("synth: the shape is too large (--ssm-conv-kernel at most 64; --ssm-heads x --ssm-state, "
         "--shared-expert-ffn and --full-attention-interval at most 2^20)");
  }
  fits("--type-attn", o.type_attn, int64_t{o.ssm_heads} * o.ssm_state);  // ssm_out rows
  fits("--type-shexp", o.type_shexp, o.n_embd);
  fits("--type-shexp", o.type_shexp, o.n_ff_shexp);
}

template <typename Fits>
void validate_mla(const Options& o, const Fits& fits) {
  positive("--rope-dims", o.rope_dims);
  positive("--kv-lora", o.kv_lora);
  positive("--v-head", o.v_head);
  positive("--expert-groups", o.expert_groups);
  if (o.q_lora < 0) fail("synth: --q-lora must be 0 (a plain attn_q) or positive");
  if (o.n_head_kv != 1) fail("synth: MLA files have one KV head (--heads-kv 1)");
  if (o.rope_dims % 8 != 0 || o.rope_dims >= o.head_dim) {
    fail("synth: --rope-dims must be a multiple of 8 below --head-dim {} (the rest is the no-rope part), got {}", o.head_dim, o.rope_dims);
  }
  if (o.kv_lora % 8 != 0) fail("synth: --kv-lora must be a multiple of 8");
  if (o.n_dense < 0 || o.n_dense >= o.n_layer) fail("synth: --dense-layers must be 0..{} (one layer at least has experts)", o.n_layer - 1);
  if (o.n_expert % o.expert_groups != 0 || o.expert_groups_used > o.expert_groups) {
    fail("synth: --expert-groups {} must divide --experts {} and be at least --expert-groups-used {}", o.expert_groups, o.n_expert,
         o.expert_groups_used);
  }
  if (o.q_lora > (1 << 16) || o.kv_lora > (1 << 16) || o.v_head > (1 << 12) || o.n_ff_dense > (1 << 20)) {
    fail("synth: the shape is too large (--q-lora and --kv-lora at most 2^16, --v-head 2^12, --dense-ffn 2^20)");
  }
  if (o.q_lora > 0) fits("--type-attn", o.type_attn, o.q_lora);
  fits("--type-attn", o.type_attn, o.head_dim - o.rope_dims);  // attn_k_b rows
  fits("--type-attn", o.type_attn, o.kv_lora);                 // attn_v_b rows
  fits("--type-attn", o.type_attn, int64_t{o.n_head} * o.v_head);
  fits("--type-shexp", o.type_shexp, o.n_embd);
  fits("--type-shexp", o.type_shexp, o.n_ff_exp);
  if (o.n_dense > 0) fits("--type-shexp", o.type_shexp, o.n_ff_dense);
}

template <typename Fits>
void validate_laguna(const Options& o, const Fits& fits) {
  positive("--shared-expert-ffn", o.n_ff_shexp);
  positive("--rope-dims", o.rope_dims);
  positive("--heads-swa", o.n_head_swa);
  if (o.sliding_window < 0 || o.sliding_window > (1 << 24)) fail("synth: --sliding-window must be 0..{}", 1 << 24);
  if (o.n_dense < 0 || o.n_dense >= o.n_layer) fail("synth: --dense-layers must be 0..{} (one layer at least has experts)", o.n_layer - 1);
  if (o.n_dense > 0) positive("--dense-ffn", o.n_ff_dense);
  if (o.n_head_swa % o.n_head_kv != 0) fail("synth: --heads-swa {} is not a multiple of --heads-kv {}", o.n_head_swa, o.n_head_kv);
  if (o.rope_dims % 2 != 0 || o.rope_dims > o.head_dim) {
    fail("synth: --rope-dims must be even and at most --head-dim {}, got {}", o.head_dim, o.rope_dims);
  }
  if (int64_t{o.n_head_swa} * o.head_dim > (1 << 20) || o.n_ff_shexp > (1 << 20) || o.n_ff_dense > (1 << 20)) {
    fail("synth: the shape is too large (--heads-swa x --head-dim, --shared-expert-ffn and --dense-ffn at most 2^20)");
  }
  fits("--type-attn", o.type_attn, int64_t{o.n_head_swa} * o.head_dim);
  fits("--type-shexp", o.type_shexp, o.n_embd);
  fits("--type-shexp", o.type_shexp, o.n_ff_shexp);
  if (o.n_dense > 0) fits("--type-shexp", o.type_shexp, o.n_ff_dense);
}

}  // namespace

void validate(const Options& o) {
  positive("--layers", o.n_layer);
  positive("--experts", o.n_expert);
  positive("--expert-used", o.n_expert_used);
  positive("--embd", o.n_embd);
  positive("--heads", o.n_head);
  positive("--heads-kv", o.n_head_kv);
  positive("--head-dim", o.head_dim);
  positive("--expert-ffn", o.n_ff_exp);
  positive("--ctx", o.context_length);
  if (o.n_expert_used > o.n_expert) fail("synth: --expert-used {} exceeds --experts {}", o.n_expert_used, o.n_expert);
  if (o.n_head % o.n_head_kv != 0) fail("synth: --heads {} is not a multiple of --heads-kv {}", o.n_head, o.n_head_kv);
  if (o.head_dim % 8 != 0) fail("synth: --head-dim must be a multiple of 8 (as the loader requires), got {}", o.head_dim);
  if (int64_t{o.n_head} * o.head_dim > (1 << 20) || int64_t{o.n_layer} * o.n_expert > (1 << 24) || o.n_embd > (1 << 20) ||
      o.n_ff_exp > (1 << 20)) {
    fail("synth: the shape is too large (heads x head-dim and --embd and --expert-ffn at most 2^20, layers x experts at most 2^24)");
  }
  if (o.tail_layers < 0 || o.tail_layers > o.n_layer) fail("synth: --tail-layers must be 0..{}", o.n_layer);
  if (!(o.zipf >= 0 && o.zipf <= 100)) fail("synth: --zipf must be between 0 and 100");
  if (o.n_vocab < 0 || o.n_vocab > (1 << 22)) fail("synth: --vocab must be 0..{}", 1 << 22);
  if (o.n_vocab > 0) {
    const size_t learned = make_vocab(o.n_merges).tokens.size();
    if (static_cast<size_t>(o.n_vocab) < learned) {
      fail("synth: --vocab {} is smaller than the {} tokens the vocabulary has with --merges {}", o.n_vocab, learned,
           o.n_merges);
    }
  }

  // Every matrix's row length must hold whole blocks of its type.
  auto fits = [](const char* role, quant::Type type, int64_t row) {
    const quant::TypeInfo& t = quant::info(type);
    if (!t.supported) fail("synth: {} type {} is not supported (supported: {})", role, t.name, quant::supported_type_names());
    if (row % t.block_elems != 0) {
      fail("synth: {} type {} needs rows that are a multiple of {}, but the row length is {}", role,
           t.name, t.block_elems, row);
    }
  };
  fits("--type-expert", o.type_expert, o.n_embd);
  fits("--type-expert-down", o.type_expert_down, o.n_ff_exp);
  if (o.type_tail_experts) {
    fits("--tail-expert-type", *o.type_tail_experts, o.n_embd);
    fits("--tail-expert-type", *o.type_tail_experts, o.n_ff_exp);
  }
  fits("--type-attn", o.type_attn, o.n_embd);
  fits("--type-attn", o.type_attn, o.n_head * o.head_dim);
  fits("--type-attn-v", o.type_attn_v, o.n_embd);
  fits("--type-embd", o.type_embd, o.n_embd);
  fits("--type-output", o.type_output, o.n_embd);
  fits("--type-router", o.type_router, o.n_embd);
  if (o.arch == Arch::kQwen35Moe) validate_qwen35moe(o, fits);
  if (o.arch == Arch::kLaguna) validate_laguna(o, fits);
  if (o.mla()) validate_mla(o, fits);
}

}  // namespace epq::synth
