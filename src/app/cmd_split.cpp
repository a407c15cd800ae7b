// `epq split`: write a model as a split model in llama.cpp's gguf-split layout.
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "app/commands.h"
#include "gguf/file.h"
#include "gguf/split.h"
#include "gguf/split_writer.h"
#include "util/error.h"
#include "util/format.h"

namespace epq::app {
namespace {

struct SplitArgs {
  std::string model;
  std::string prefix;
  std::optional<int> shards;
  std::string max_size;
};

// Whether `path` is one of the model's own files (writing it would replace the input).
bool is_input(const gguf::File& model, const std::string& path) {
  std::error_code ec;
  for (const gguf::Shard& s : model.shards()) {
    if (std::filesystem::equivalent(s.path, path, ec)) return true;
  }
  return false;
}

void run(const SplitArgs& a) {
  if (a.shards.has_value() == !a.max_size.empty()) fail("give either --shards N or --max-size SIZE");
  const gguf::File model = gguf::File::open(a.model);
  std::vector<uint64_t> bytes;
  for (const gguf::TensorInfo& t : model.tensors()) bytes.push_back(t.bytes);
  if (bytes.empty()) fail("{}: the model has no tensors to split", a.model);
  std::vector<int> shard_of;
  if (a.shards) {
    if (static_cast<size_t>(*a.shards) > bytes.size()) fail("--shards {}: the model has only {} tensors", *a.shards, bytes.size());
    shard_of = gguf::shards_by_count(bytes, *a.shards);
  } else {
    const std::optional<uint64_t> max = parse_size(a.max_size);
    if (!max || *max == 0) fail("--max-size: expected a size such as 4G or 500M, got '{}'", printable(a.max_size));
    shard_of = gguf::shards_by_size(bytes, *max);
  }
  const int n = shard_of.back() + 1;
  for (int no = 0; no < n; ++no) {
    const std::string path = gguf::split_path(a.prefix, no, n);
    if (is_input(model, path)) fail("{}: is a file of the input model; choose another -o prefix", path);
  }
  const std::vector<std::string> paths = gguf::write_split(model, a.prefix, shard_of);
  for (int no = 0; no < n; ++no) {
    const auto tensors = std::count(shard_of.begin(), shard_of.end(), no);
    fmt::print("wrote {}: {}, {} tensors\n", paths[static_cast<size_t>(no)], format_bytes(std::filesystem::file_size(paths[static_cast<size_t>(no)])),
               tensors);
  }
}

}  // namespace

void add_split_command(CLI::App& root) {
  auto args = std::make_shared<SplitArgs>();
  CLI::App* c = root.add_subcommand("split",
                                    "Write a model as a split model in llama.cpp's gguf-split layout: PREFIX-00001-of-0000N.gguf, ... "
                                    "(run and the others take the first shard)");
  c->add_option("-m,--model", args->model, "GGUF model to split (itself split or not)")->required();
  c->add_option("-o,--output", args->prefix, "Prefix of the shards' paths: PREFIX-00001-of-0000N.gguf, ...")->required();
  c->add_option("--shards", args->shards, "Number of shards, of about equal size")->check(CLI::Range(1, gguf::kMaxShards));
  c->add_option("--max-size", args->max_size,
                "Tensor data per shard at most this size, e.g. 4G (a larger tensor gets a shard of its own)");
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
