#include "synth/options.h"

#include "util/error.h"

namespace epq::synth {

std::optional<Options> preset(const std::string& name) {
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

std::vector<std::string> preset_names() { return {"tiny", "small", "qwen3-30b-a3b"}; }

void validate(const Options& o) {
  auto positive = [](const char* what, int v) {
    if (v <= 0) fail("synth: {} must be positive, got {}", what, v);
  };
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

  // Every matrix's row length must hold whole blocks of its type.
  auto fits = [](const char* role, quant::Type type, int row) {
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
}

}  // namespace epq::synth
