// `epq synth`: write a GGUF of a real architecture with random weights.
#include <fmt/core.h>

#include <map>

#include "app/commands.h"
#include "synth/qwen3moe.h"
#include "util/error.h"
#include "util/format.h"
#include "util/process_memory.h"
#include "util/progress.h"

namespace epq::app {
namespace {

struct SynthArgs {
  std::string preset = "tiny";
  std::string output;
  std::map<std::string, std::string> types;  // flag -> type name
  std::optional<int> layers, experts, expert_used, embd, heads, heads_kv, head_dim, expert_ffn, ctx, merges, threads, tail_layers;
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

void run(const SynthArgs& a) {
  auto base = synth::preset(a.preset);
  if (!base) fail("unknown preset '{}' (choose tiny, small or qwen3-30b-a3b)", a.preset);
  synth::Options o = *base;
  auto apply = [](auto& field, const auto& value) { if (value) field = *value; };
  apply(o.n_layer, a.layers);
  apply(o.n_expert, a.experts);
  apply(o.n_expert_used, a.expert_used);
  apply(o.n_embd, a.embd);
  apply(o.n_head, a.heads);
  apply(o.n_head_kv, a.heads_kv);
  apply(o.head_dim, a.head_dim);
  apply(o.n_ff_exp, a.expert_ffn);
  apply(o.context_length, a.ctx);
  apply(o.n_merges, a.merges);
  apply(o.threads, a.threads);
  apply(o.tail_layers, a.tail_layers);
  apply(o.seed, a.seed);
  apply(o.zipf, a.zipf);
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
  }
  if (o.type_tail_experts && o.tail_layers == 0) fail("--tail-expert-type needs --tail-layers N");

  ProgressLine progress(!a.quiet);
  synth::write_qwen3moe(o, a.output, [&](const synth::Progress& p) {
    progress.update(fmt::format("synth: {:3.0f}%  {} of {}  tensor {}/{}  {:.1f} s",
                                100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(std::max<uint64_t>(1, p.bytes_total)),
                                format_bytes(p.bytes_done), format_bytes(p.bytes_total), p.tensor, p.n_tensors,
                                progress.elapsed_seconds()),
                    p.bytes_done == p.bytes_total);
  });
  progress.finish();
  ProcessMemory m = read_process_memory();
  fmt::print("wrote {}: preset {}, {} layers x {} experts (top-{}), in {:.1f} s, peak RSS {}\n", a.output,
             a.preset, o.n_layer, o.n_expert, o.n_expert_used, progress.elapsed_seconds(), format_bytes(m.peak_rss));
}

}  // namespace

void add_synth_command(CLI::App& root) {
  auto args = std::make_shared<SynthArgs>();
  CLI::App* c = root.add_subcommand("synth", "Write a qwen3moe GGUF with random weights (for tests and benchmarks)");
  c->add_option("-o,--output", args->output, "Output GGUF path")->required();
  c->add_option("--preset", args->preset, "tiny (a few MB), small (~1 GB), qwen3-30b-a3b (~17 GB)")->capture_default_str();
  c->add_option("--layers", args->layers, "Number of layers");
  c->add_option("--experts", args->experts, "Routed experts per layer");
  c->add_option("--expert-used", args->expert_used, "Experts used per token (top-k)");
  c->add_option("--embd", args->embd, "Embedding length");
  c->add_option("--heads", args->heads, "Attention heads");
  c->add_option("--heads-kv", args->heads_kv, "Key/value heads");
  c->add_option("--head-dim", args->head_dim, "Dimension of each head");
  c->add_option("--expert-ffn", args->expert_ffn, "Expert feed-forward length");
  c->add_option("--ctx", args->ctx, "Training context length written to the metadata");
  c->add_option("--merges", args->merges, "BPE merges to learn for the vocabulary");
  for (const char* flag : {"--type-expert", "--type-expert-down", "--type-attn", "--type-attn-v", "--type-embd",
                           "--type-output", "--type-router", "--tail-expert-type"}) {
    std::string f = flag;
    c->add_option_function<std::string>(f, [args, f](const std::string& v) { args->types[f] = v; },
                                        "Tensor type, e.g. Q4_K, Q6_K, Q8_0, BF16, F32");
  }
  c->add_option("--tail-layers", args->tail_layers, "Layers at the end that use --tail-expert-type for their experts");
  c->add_option("--zipf", args->zipf, "Skew expert popularity: rank r is chosen ~ (r+1)^-S (0: uniform)");
  c->add_option("--yarn-factor", args->yarn_factor, "Write YaRN rope scaling with this factor");
  c->add_option("--yarn-orig-ctx", args->yarn_orig_ctx, "YaRN original context length");
  c->add_flag("--tied-output", args->tied_output, "Omit output.weight (the lm head reuses token_embd)");
  c->add_option("--seed", args->seed, "Random seed: the same seed gives a byte-identical file");
  c->add_option("-t,--threads", args->threads, "Threads (default: physical cores)");
  c->add_flag("-q,--quiet", args->quiet, "No progress output");
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
