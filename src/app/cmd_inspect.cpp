// `epq inspect`: what is in a GGUF file, and what it will cost to run.
#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <vector>

#include "app/commands.h"
#include "gguf/file.h"
#include "models/tensor_role.h"
#include "quant/reference.h"
#include "util/error.h"
#include "util/format.h"

namespace epq::app {
namespace {

struct InspectArgs {
  std::string model;
  bool no_metadata = false;
  bool no_tensors = false;
  std::string tensor;
  int64_t dequant = 0;
};

double percent(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

void print_metadata(const gguf::File& f) {
  fmt::print("\nMetadata ({} keys)\n", f.metadata().size());
  for (const auto& [key, value] : f.metadata()) {
    std::string type = value.type() == gguf::ValueType::ARRAY
                           ? fmt::format("{}[{}]", gguf::type_name(value.elem_type()), value.size())
                           : gguf::type_name(value.type());
    fmt::print("  {:<44} {:<14} {}\n", key, type, value.to_display());
  }
}

// A split model's files, one line each (an unsplit file is described by the first line).
void print_shards(const gguf::File& f) {
  if (f.shards().size() == 1) return;
  fmt::print("\nShards ({})\n  {:>5}  {:<48} {:>12} {:>8} {:>9} {:>12}\n", f.shards().size(), "shard", "path", "size", "tensors",
             "alignment", "data offset");
  for (size_t i = 0; i < f.shards().size(); ++i) {
    const gguf::Shard& s = f.shards()[i];
    fmt::print("  {:>5}  {:<48} {:>12} {:>8} {:>9} {:>12}\n", i + 1, s.path, format_bytes(s.file_size), s.n_tensors, s.alignment,
               s.data_offset);
  }
}

void print_tensors(const gguf::File& f) {
  // Offsets count from the start of the tensor's own file; a split model names the shard.
  const bool split = f.shards().size() > 1;
  fmt::print("\nTensors ({})\n  {:<36} {:<8} {:<22} {:>14} {:>12}{}\n", f.tensors().size(), "name", "type", "shape", "offset",
             "bytes", split ? "  shard" : "");
  for (const gguf::TensorInfo& t : f.tensors()) {
    fmt::print("  {:<36} {:<8} {:<22} {:>14} {:>12}{}\n", t.name, quant::name(t.type), t.shape_string(), t.offset, t.bytes,
               split ? fmt::format("  {:>5}", t.shard + 1) : "");
  }
}

void print_composition(const gguf::File& f) {
  std::map<models::TensorRole, uint64_t> bytes;
  uint64_t total = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    bytes[models::classify_tensor(t.name)] += t.bytes;
    total += t.bytes;
  }
  fmt::print("\nWeight composition\n  {:<16} {:>12} {:>8}\n", "part", "bytes", "share");
  for (models::TensorRole role : models::kAllRoles) {
    fmt::print("  {:<16} {:>12} {:>7.2f}%\n", models::role_name(role), format_bytes(bytes[role]), percent(bytes[role], total));
  }
  fmt::print("  {:<16} {:>12} {:>7.2f}%\n", "total", format_bytes(total), 100.0);
}

// Routed experts: per layer, the type of each matrix and the bytes of one expert.
void print_experts(const gguf::File& f, const std::string& arch) {
  struct LayerExperts {
    std::string types;
    uint64_t expert_bytes = 0;
    int64_t n_expert = 0;
  };
  std::map<int, LayerExperts> layers;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (models::classify_tensor(t.name) != models::TensorRole::kRoutedExpert || t.dims.size() != 3 || t.dims[2] == 0) continue;
    int layer = -1;
    if (std::sscanf(t.name.c_str(), "blk.%d.", &layer) != 1) continue;
    LayerExperts& l = layers[layer];
    std::string part = t.name.substr(t.name.find('.', 4) + 1);
    part = part.substr(0, part.find("_exps"));
    l.types += (l.types.empty() ? "" : " ") + part + ":" + quant::name(t.type);
    l.expert_bytes += t.bytes / static_cast<uint64_t>(t.dims[2]);
    l.n_expert = t.dims[2];
  }
  if (layers.empty()) {
    fmt::print("\nNo routed experts: this is not a Mixture-of-Experts model.\n");
    return;
  }
  fmt::print("\nRouted experts per layer\n  {:<10} {:>8} {:>14}  {}\n", "layers", "experts", "bytes/expert", "types");
  // Consecutive layers with the same layout share one line.
  for (auto it = layers.begin(); it != layers.end();) {
    auto end = it;
    while (std::next(end) != layers.end() && std::next(end)->second.types == it->second.types &&
           std::next(end)->second.expert_bytes == it->second.expert_bytes) {
      ++end;
    }
    std::string range = it->first == end->first ? fmt::format("{}", it->first) : fmt::format("{}-{}", it->first, end->first);
    fmt::print("  {:<10} {:>8} {:>14}  {}\n", range, it->second.n_expert, format_bytes(it->second.expert_bytes), it->second.types);
    it = std::next(end);
  }
  const int64_t used = f.get_int_or(arch + ".expert_used_count", 0);
  uint64_t per_token = 0;
  for (const auto& [layer, l] : layers) per_token += l.expert_bytes * static_cast<uint64_t>(used);
  fmt::print("  routed-expert working set per token: {} ({} experts x {} layers)\n", format_bytes(per_token), used,
             layers.size());
  // The rest a decoded token reads: every weight of the forward pass but the routed experts
  // and the token embeddings (one row of them; all where the output layer is tied to
  // them). The NextN blocks after the last layer are not run.
  const int64_t n_run = f.get_int_or(arch + ".block_count", INT32_MAX) - f.get_int_or(arch + ".nextn_predict_layers", 0);
  uint64_t other = 0, embeddings = 0;
  bool tied_output = true;
  for (const gguf::TensorInfo& t : f.tensors()) {
    const models::TensorRole role = models::classify_tensor(t.name);
    if (role == models::TensorRole::kRoutedExpert || models::tensor_block(t.name) >= n_run) continue;
    tied_output = tied_output && role != models::TensorRole::kOutput;
    (role == models::TensorRole::kEmbedding ? embeddings : other) += t.bytes;
  }
  if (tied_output) other += embeddings;
  fmt::print("  weights read per decoded token: {} (the working set and {} of other weights; all in RAM, memory bandwidth\n"
             "    over this bounds decode)\n",
             format_bytes(per_token + other), format_bytes(other));
}

void print_kv(const gguf::File& f, const std::string& arch) {
  // Raw metadata, shown as it is: values outside 0..2^30 count as 0 (no arithmetic overflows).
  auto count = [&](const std::string& key, int64_t fallback) {
    const int64_t v = f.get_int_or(key, fallback);
    return v >= 0 && v <= (int64_t{1} << 30) ? v : 0;
  };
  // Layers with a KV cache are those with an attn_k tensor (hybrid models have others);
  // with a sliding window W, layer il is windowed iff il % pattern != 0 (llama.cpp's rule).
  const int64_t window = count(arch + ".attention.sliding_window", 0), pattern = count(arch + ".attention.sliding_window_pattern", 4);
  int64_t n_layer = 0, n_windowed = 0, n_recurrent = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name.starts_with("blk.") && t.name.ends_with(".attn_k.weight")) {
      const bool windowed = window > 0 && pattern > 0 && std::atoll(t.name.c_str() + 4) % pattern != 0;
      (windowed ? n_windowed : n_layer)++;
    }
    n_recurrent += t.name.starts_with("blk.") && t.name.ends_with(".ssm_conv1d.weight");
  }
  // head_count may be a per-layer array: its first entry gives the default head size.
  const gguf::Value* heads = f.find(arch + ".attention.head_count");
  const int64_t n_head = heads && heads->type() == gguf::ValueType::ARRAY ? (heads->ints().empty() ? 0 : heads->ints()[0])
                                                                           : count(arch + ".attention.head_count", 0);
  const int64_t n_head_kv = count(arch + ".attention.head_count_kv", n_head);
  const int64_t n_embd = count(arch + ".embedding_length", 0);
  const int64_t head_dim = n_head > 0 ? n_embd / n_head : 0;
  const int64_t k = count(arch + ".attention.key_length", head_dim);
  const int64_t v = count(arch + ".attention.value_length", head_dim);
  const uint64_t per_layer = static_cast<uint64_t>(n_head_kv) * static_cast<uint64_t>(k + v) * 2;
  fmt::print("\nKV cache (F16): {} per token ({} layers x {} KV heads x ({} + {}) x 2 bytes)\n", format_bytes(n_layer * per_layer),
             n_layer, n_head_kv, k, v);
  if (n_windowed > 0) {
    fmt::print("  and {} sliding-window layers of {} positions: at most {} per sequence, whatever the context (plus a batch)\n",
               n_windowed, window, format_bytes(static_cast<uint64_t>(n_windowed * window) * per_layer));
  }
  if (n_recurrent > 0) {
    // Gated DeltaNet: per layer, K-1 conv inputs of 2 Hk S + Hv S channels and Hv S x S state.
    const uint64_t K = count(arch + ".ssm.conv_kernel", 0), S = count(arch + ".ssm.state_size", 0);
    const uint64_t Hk = count(arch + ".ssm.group_count", 0), Hv = count(arch + ".ssm.time_step_rank", 0);
    const uint64_t floats = (K > 0 ? (K - 1) : 0) * (2 * Hk * S + Hv * S) + Hv * S * S;
    fmt::print("Recurrent state (F32): {} per sequence, fixed ({} layers x ({} conv + {} x {} x {} state) x 4 bytes)\n",
               format_bytes(static_cast<uint64_t>(n_recurrent) * floats * 4), n_recurrent, (K > 0 ? K - 1 : 0) * (2 * Hk * S + Hv * S), Hv, S, S);
  }
}

void print_dequant(const gguf::File& f, const std::string& name, int64_t n) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) fail("{}: no tensor named '{}'", f.path(), name);
  if (!quant::info(t->type).supported) {
    fail("tensor '{}' has type {}, which EPQ does not support (supported: {})", name, quant::name(t->type),
         quant::supported_type_names());
  }
  const int64_t block = quant::info(t->type).block_elems;
  const int64_t count = std::min(n, t->n_elements);
  const int64_t padded = (count + block - 1) / block * block;
  std::vector<float> values(static_cast<size_t>(padded));
  quant::dequantize_row(t->type, f.tensor_data(*t).data(), values.data(), padded);
  fmt::print("{} {} {}: first {} values\n", name, quant::name(t->type), t->shape_string(), count);
  for (int64_t i = 0; i < count; ++i) fmt::print("{}{:.8g}", i % 8 == 0 ? (i ? "\n" : "") : " ", values[static_cast<size_t>(i)]);
  fmt::print("\n");
}

void run(const InspectArgs& a) {
  gguf::File f = gguf::File::open(a.model);
  if (!a.tensor.empty()) return print_dequant(f, a.tensor, a.dequant > 0 ? a.dequant : 16);
  const std::string arch = f.get_string_or("general.architecture", "?");
  const gguf::Shard& first = f.shards()[0];
  if (f.shards().size() == 1) {
    fmt::print("{}: GGUF v{}, {}, {} tensors, {} metadata keys, alignment {}, data at offset {}\n", a.model, f.version(),
               format_bytes(first.file_size), f.tensors().size(), f.metadata().size(), first.alignment, first.data_offset);
  } else {
    uint64_t bytes = 0;
    for (const gguf::Shard& s : f.shards()) bytes += s.file_size;
    fmt::print("{}: GGUF v{}, split in {} shards, {} in all, {} tensors, {} metadata keys\n", a.model, f.version(), f.shards().size(),
               format_bytes(bytes), f.tensors().size(), f.metadata().size());
  }
  fmt::print("architecture: {}, name: {}\n", arch, f.get_string_or("general.name", "?"));
  print_shards(f);
  if (!a.no_metadata) print_metadata(f);
  if (!a.no_tensors) print_tensors(f);
  print_composition(f);
  print_experts(f, arch);
  print_kv(f, arch);
}

}  // namespace

void add_inspect_command(CLI::App& root) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* c = root.add_subcommand("inspect", "Show a GGUF file's metadata, tensors, weight composition and memory needs");
  c->add_option("model", args->model, "GGUF file (of a split model: its first shard, ...-00001-of-0000N.gguf)")->required();
  c->add_flag("--no-metadata", args->no_metadata, "Skip the metadata listing");
  c->add_flag("--no-tensors", args->no_tensors, "Skip the tensor table");
  c->add_option("--tensor", args->tensor, "Print dequantized values of this tensor instead");
  c->add_option("--dequant", args->dequant, "How many values --tensor prints (default 16)")->check(CLI::Range(1, 1 << 24));
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
