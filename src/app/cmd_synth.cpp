// `epq synth`: write a GGUF of a real architecture with random weights.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "app/commands.h"
#include "synth/deepseek2.h"
#include "synth/laguna.h"
#include "synth/qwen35moe.h"
#include "synth/qwen3moe.h"
#include "util/error.h"
#include "util/format.h"
#include "util/process_memory.h"
#include "util/progress.h"

namespace epq::app {
namespace {

using synth::Arch;

// An integer shape flag, the option it sets, and the architectures it belongs to (none
// listed: all).
struct ShapeFlag {
  const char* flag;
  int synth::Options::*field;
  std::vector<Arch> only;
  const char* help;
};

const ShapeFlag kShapeFlags[] = {
    {"--layers", &synth::Options::n_layer, {}, "Number of layers"},
    {"--experts", &synth::Options::n_expert, {}, "Routed experts per layer"},
    {"--expert-used", &synth::Options::n_expert_used, {}, "Experts used per token (top-k)"},
    {"--embd", &synth::Options::n_embd, {}, "Embedding length"},
    {"--heads", &synth::Options::n_head, {}, "Attention heads"},
    {"--heads-kv", &synth::Options::n_head_kv, {}, "Key/value heads"},
    {"--head-dim", &synth::Options::head_dim, {}, "Dimension of each head"},
    {"--expert-ffn", &synth::Options::n_ff_exp, {}, "Expert feed-forward length"},
    {"--ctx", &synth::Options::context_length, {}, "Training context length written to the metadata"},
    {"--merges", &synth::Options::n_merges, {}, "BPE merges to learn for the vocabulary"},
    {"--vocab", &synth::Options::n_vocab, {}, "Pad the vocabulary with unused [PAD<id>] tokens to this size"},
    {"--tail-layers", &synth::Options::tail_layers, {}, "Layers at the end that use --tail-expert-type for their experts"},
    {"--shared-expert-ffn", &synth::Options::n_ff_shexp, {Arch::kQwen35Moe, Arch::kLaguna},
     "qwen35moe, laguna: shared expert feed-forward length"},
    {"--rope-dims", &synth::Options::rope_dims, {Arch::kQwen35Moe, Arch::kLaguna, Arch::kDeepseek2, Arch::kXing4},
     "qwen35moe, laguna: rotated dims per full-attention head (n_rot); deepseek2, xing4_0: the rope part of --head-dim"},
    {"--full-attention-interval", &synth::Options::full_attention_interval, {Arch::kQwen35Moe},
     "qwen35moe: layer il is full attention iff (il+1) % N == 0, the rest Gated DeltaNet"},
    {"--ssm-conv-kernel", &synth::Options::ssm_conv_kernel, {Arch::kQwen35Moe}, "qwen35moe: causal conv width"},
    {"--ssm-state", &synth::Options::ssm_state, {Arch::kQwen35Moe}, "qwen35moe: linear-attention head dim (state size)"},
    {"--ssm-groups", &synth::Options::ssm_groups, {Arch::kQwen35Moe}, "qwen35moe: linear-attention key heads"},
    {"--ssm-heads", &synth::Options::ssm_heads, {Arch::kQwen35Moe},
     "qwen35moe: linear-attention value heads (time_step_rank)"},
    {"--sliding-window", &synth::Options::sliding_window, {Arch::kLaguna},
     "laguna: window of the sliding-window layers (il % 4 != 0); 0 makes every layer full"},
    {"--heads-swa", &synth::Options::n_head_swa, {Arch::kLaguna}, "laguna: query heads of the sliding-window layers"},
    {"--dense-layers", &synth::Options::n_dense, {Arch::kLaguna, Arch::kDeepseek2, Arch::kXing4},
     "laguna, deepseek2, xing4_0: leading dense (expert-free) layers"},
    {"--dense-ffn", &synth::Options::n_ff_dense, {Arch::kLaguna, Arch::kDeepseek2, Arch::kXing4},
     "laguna, deepseek2, xing4_0: feed-forward length of the dense layers"},
    {"--q-lora", &synth::Options::q_lora, {Arch::kDeepseek2, Arch::kXing4}, "deepseek2, xing4_0: query LoRA rank (0: a plain attn_q)"},
    {"--kv-lora", &synth::Options::kv_lora, {Arch::kDeepseek2, Arch::kXing4}, "deepseek2, xing4_0: KV latent rank (the cache row is this + --rope-dims)"},
    {"--v-head", &synth::Options::v_head, {Arch::kDeepseek2, Arch::kXing4}, "deepseek2, xing4_0: value dims per head"},
    {"--expert-groups", &synth::Options::expert_groups, {Arch::kDeepseek2, Arch::kXing4},
     "deepseek2, xing4_0: expert groups of group-limited routing"},
    {"--expert-groups-used", &synth::Options::expert_groups_used, {Arch::kDeepseek2, Arch::kXing4},
     "deepseek2, xing4_0: groups a token's experts come from"},
};

std::string arch_list(const std::vector<Arch>& archs) {
  std::string s;
  for (Arch a : archs) s += (s.empty() ? "" : " or ") + std::string(synth::arch_name(a));
  return s;
}

struct SynthArgs {
  std::string arch = "qwen3moe";
  std::string preset = "tiny";
  std::string output;
  std::map<std::string, std::string> types;  // flag -> type name
  std::map<std::string, int> shape;          // flag -> value
  std::optional<int> threads;
  std::optional<uint64_t> seed;
  std::optional<double> zipf, yarn_factor;
  std::optional<int> yarn_orig_ctx;
  bool tied_output = false;
  bool quiet = false;
};

quant::Type parse_type(const std::string& flag, const std::string& text) {
  auto t = quant::type_from_name(text);
  if (!t) fail("{}: unknown tensor type '{}' (supported: {})", flag, text, quant::supported_type_names());
  return *t;
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

synth::Options base_options(const SynthArgs& a) {
  const auto arch = synth::arch_from_name(a.arch);
  if (!arch) fail("unknown architecture '{}' (choose qwen3moe, qwen35moe, laguna, deepseek2 or xing4_0)", a.arch);
  if (auto o = synth::preset(*arch, a.preset)) return *o;
  for (Arch other : {Arch::kQwen3Moe, Arch::kQwen35Moe, Arch::kLaguna, Arch::kDeepseek2, Arch::kXing4}) {
    if (other != *arch && synth::preset(other, a.preset)) {
      fail("preset '{}' is a {} preset, not a {} one: add --arch {} (or choose {})", a.preset, synth::arch_name(other),
           a.arch, synth::arch_name(other), join(synth::preset_names(*arch)));
    }
  }
  fail("unknown preset '{}' for --arch {} (choose {})", a.preset, a.arch, join(synth::preset_names(*arch)));
}

void run(const SynthArgs& a) {
  synth::Options o = base_options(a);
  const std::string arch = synth::arch_name(o.arch);
  const synth::Options preset = o;
  for (const ShapeFlag& f : kShapeFlags) {
    auto it = a.shape.find(f.flag);
    if (it == a.shape.end()) continue;
    if (!f.only.empty() && std::find(f.only.begin(), f.only.end(), o.arch) == f.only.end()) {
      fail("{} applies to --arch {} only", f.flag, arch_list(f.only));
    }
    o.*f.field = it->second;
  }
  // --layers N on a preset with a different-type tail keeps the tail's share of the layers.
  if (preset.tail_layers > 0 && o.n_layer != preset.n_layer && !a.shape.contains("--tail-layers")) {
    o.tail_layers = std::max(1, static_cast<int>(std::lround(static_cast<double>(preset.tail_layers) * o.n_layer / preset.n_layer)));
    o.tail_layers = std::min(o.tail_layers, o.n_layer - o.n_dense);
  }
  auto apply = [](auto& field, const auto& value) { if (value) field = *value; };
  apply(o.threads, a.threads);
  apply(o.seed, a.seed);
  apply(o.zipf, a.zipf);
  if (o.arch == Arch::kQwen35Moe && (a.yarn_factor || a.yarn_orig_ctx)) {
    fail("{} does not apply to --arch {} (it has no rope scaling)", a.yarn_factor ? "--yarn-factor" : "--yarn-orig-ctx",
         arch);
  }
  apply(o.yarn_factor, a.yarn_factor);
  apply(o.yarn_original_context, a.yarn_orig_ctx);
  if (o.yarn_factor > 1 && o.yarn_original_context <= 0) o.yarn_original_context = o.context_length;
  o.tied_output = o.tied_output || a.tied_output;
  for (const auto& [flag, name] : a.types) {
    quant::Type t = parse_type(flag, name);
    if (flag == "--type-expert") o.type_expert = t;
    else if (flag == "--type-expert-down") o.type_expert_down = t;
    else if (flag == "--type-attn") o.type_attn = t;
    else if (flag == "--type-attn-v") o.type_attn_v = t;
    else if (flag == "--type-embd") o.type_embd = t;
    else if (flag == "--type-output") o.type_output = t;
    else if (flag == "--type-router") o.type_router = t;
    else if (flag == "--tail-expert-type") o.type_tail_experts = t;
    else if (flag == "--type-shexp") {
      if (o.arch == Arch::kQwen3Moe) fail("--type-shexp does not apply to --arch qwen3moe (it has no shared expert)");
      o.type_shexp = t;
    }
  }
  if (o.type_tail_experts && o.tail_layers == 0) fail("--tail-expert-type needs --tail-layers N");

  ProgressLine progress(!a.quiet);
  auto on_progress = [&](const synth::Progress& p) {
    progress.update(fmt::format("synth: {:3.0f}%  {} of {}  tensor {}/{}  {:.1f} s",
                                100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(std::max<uint64_t>(1, p.bytes_total)),
                                format_bytes(p.bytes_done), format_bytes(p.bytes_total), p.tensor, p.n_tensors,
                                progress.elapsed_seconds()),
                    p.bytes_done == p.bytes_total);
  };
  std::string shape = fmt::format("preset {}, {} layers", a.preset, o.n_layer);
  if (o.arch == Arch::kQwen35Moe) {
    synth::write_qwen35moe(o, a.output, on_progress);
    int full = 0;
    for (int l = 0; l < o.n_layer; ++l) full += o.recurrent(l) ? 0 : 1;
    shape = fmt::format("qwen35moe {} ({} Gated DeltaNet, {} full attention)", shape, o.n_layer - full, full);
  } else if (o.mla()) {
    synth::write_deepseek2(o, a.output, on_progress);
    shape = fmt::format("{} {} ({} dense, MLA with kv_lora {}{}{})", arch, shape, o.n_dense, o.kv_lora,
                        o.arch == Arch::kXing4 ? ", 4 hyper-connection streams" : "",
                        o.nextn > 0 ? fmt::format(", {} MTP block", o.nextn) : "");
  } else if (o.arch == Arch::kLaguna) {
    synth::write_laguna(o, a.output, on_progress);
    int sliding = 0;
    for (int l = 0; l < o.n_layer; ++l) sliding += o.sliding(l) ? 1 : 0;
    shape = fmt::format("laguna {} ({} dense, {} sliding-window, {} full attention; {} with {} experts)", shape, o.n_dense, sliding,
                        o.n_layer - sliding, o.tail_layers,
                        o.type_tail_experts ? quant::info(*o.type_tail_experts).name : quant::info(o.type_expert).name);
  } else {
    synth::write_qwen3moe(o, a.output, on_progress);
  }
  progress.finish();
  ProcessMemory m = read_process_memory();
  fmt::print("wrote {}: {} x {} experts (top-{}), in {:.1f} s, peak RSS {}\n", a.output, shape, o.n_expert,
             o.n_expert_used, progress.elapsed_seconds(), format_bytes(m.peak_rss));
}

}  // namespace

void add_synth_command(CLI::App& root) {
  auto args = std::make_shared<SynthArgs>();
  CLI::App* c = root.add_subcommand("synth", "Write a qwen3moe, qwen35moe, laguna, deepseek2 or xing4_0 GGUF with random weights (for tests and benchmarks)");
  c->add_option("-o,--output", args->output, "Output GGUF path")->required();
  c->add_option("--arch", args->arch,
                "qwen3moe (Qwen3 MoE), qwen35moe (Qwen3.5/3.6 MoE, Gated DeltaNet hybrid), laguna (poolside Laguna), "
                "deepseek2 (DeepSeek-V2/V3 class, MLA) or xing4_0 (Xing4.0: MLA and hyper-connections)")
      ->capture_default_str();
  c->add_option("--preset", args->preset,
                "qwen3moe: tiny (a few MB), small (~1 GB), qwen3-30b-a3b (~17 GB); "
                "qwen35moe: tiny (~20 MB), small (~500 MB), qwen3.6-35b-a3b (~23 GB); "
                "laguna: tiny (~20 MB), small (~500 MB), laguna-s-2.1 (~96 GB; --layers 12 keeps the BF16 share, ~24 GB); "
                "deepseek2: tiny, small, deepseek-v3 (~380 GB: cut it with --layers); xing4_0: tiny, small, xing4.0-29b-a4b (~19 GiB)")
      ->capture_default_str();
  for (const ShapeFlag& f : kShapeFlags) {
    std::string flag = f.flag;
    c->add_option_function<int>(flag, [args, flag](const int& v) { args->shape[flag] = v; }, f.help);
  }
  for (const char* flag : {"--type-expert", "--type-expert-down", "--type-attn", "--type-attn-v", "--type-embd",
                           "--type-output", "--type-router", "--type-shexp", "--tail-expert-type"}) {
    std::string f = flag;
    c->add_option_function<std::string>(f, [args, f](const std::string& v) { args->types[f] = v; },
                                        "Tensor type, e.g. Q4_K, Q6_K, Q8_0, BF16, F32");
  }
  c->add_option("--zipf", args->zipf, "Skew expert popularity: rank r is chosen ~ (r+1)^-S (0: uniform)");
  c->add_option("--yarn-factor", args->yarn_factor, "qwen3moe, laguna, deepseek2, xing4_0: write YaRN rope scaling with this factor");
  c->add_option("--yarn-orig-ctx", args->yarn_orig_ctx, "qwen3moe, laguna, deepseek2, xing4_0: YaRN original context length");
  c->add_flag("--tied-output", args->tied_output, "Omit output.weight (the lm head reuses token_embd)");
  c->add_option("--seed", args->seed, "Random seed: the same seed gives a byte-identical file");
  c->add_option("-t,--threads", args->threads, "Threads (default: physical cores)");
  c->add_flag("-q,--quiet", args->quiet, "No progress output");
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
