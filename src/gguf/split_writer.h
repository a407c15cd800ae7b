#pragma once
// Writes a model as a split model in the gguf-split layout (gguf/split.h), one Writer
// per shard: the first shard carries the model's metadata, every shard the split keys
// and a run of consecutive tensors in the model's order, its data aligned as the model's.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gguf/file.h"

namespace epq::gguf {

// The shard of each tensor, for tensors of these byte sizes in order: `shards` runs of
// about equal bytes, none empty (1 <= shards <= the tensor count).
std::vector<int> shards_by_count(std::span<const uint64_t> tensor_bytes, int shards);
// Runs of at most max_bytes each, a tensor larger than that alone in its shard.
std::vector<int> shards_by_size(std::span<const uint64_t> tensor_bytes, uint64_t max_bytes);

// Writes shard i of the model (mapped, from File::open) to split_path(prefix, i, n), with
// tensor t in shard shard_of[t]; the shards must be numbered 0 to n-1 in order, none
// empty. Existing split keys of the model are replaced. Returns the paths written.
std::vector<std::string> write_split(const File& model, const std::string& prefix, const std::vector<int>& shard_of);

}  // namespace epq::gguf
