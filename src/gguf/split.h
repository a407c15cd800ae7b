#pragma once
// The gguf-split layout (llama.cpp's): a model stored as several GGUF files, its shards.
// Shard i of n (0-based) is named <prefix>-<i+1>-of-<n>.gguf, both numbers five digits.
// Each shard is a whole GGUF file whose tensor offsets count from its own data section;
// the first carries the model's metadata, and every shard carries split.no (uint16, its
// index), split.count (uint16, n) and split.tensors.count (int32, the tensors of all
// shards together). A file without these keys is a model of one shard.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace epq::gguf {

class File;

inline constexpr std::string_view kSplitNoKey = "split.no";
inline constexpr std::string_view kSplitCountKey = "split.count";
inline constexpr std::string_view kSplitTensorsCountKey = "split.tensors.count";
inline constexpr int kMaxShards = 65535;  // split.count is a uint16

// The name of shard `no` (0-based) of `count`: "<prefix>-<no+1>-of-<count>.gguf".
std::string split_path(std::string_view prefix, int no, int count);

// What a path named in the layout says about itself; nullopt for any other name.
struct SplitName {
  std::string prefix;
  int no = 0;  // 0-based
  int count = 0;
};
std::optional<SplitName> parse_split_name(std::string_view path);

// The model's name from its path: the file name without its directory and extension, and
// for a shard in the layout also without "-NNNNN-of-MMMMM" ("dir/m-00001-of-00003.gguf"
// and "dir/m.gguf" both give "m").
std::string model_name(std::string_view path);

// What one shard's split keys say. An unsplit file (no split keys) is shard 0 of 1.
struct SplitKeys {
  bool present = false;
  int no = 0;
  int count = 1;
  int64_t tensors = 0;  // tensors of the whole model
};
// Reads the split keys of one file just parsed (all three or none); throws an Error
// naming the file when one is missing or out of range.
SplitKeys read_split_keys(const File& shard);

// The shards of the model whose first shard is `first`: checks its keys against its
// name and tells where the others are. Throws an Error naming the file and the problem
// (a later shard given instead of the first, a name that does not say where the others
// are).
class SplitSet {
 public:
  explicit SplitSet(const File& first);
  int count() const { return keys_.count; }
  const std::string& shard_path(int no) const { return paths_[static_cast<size_t>(no)]; }
  // Throws an Error naming shard `no` if its file does not exist.
  void check_present(int no) const;
  // Checks shard `no`, opened from shard_path(no), against the first shard's keys.
  void check_shard(int no, const File& shard) const;
  // Checks the tensors of all shards together against split.tensors.count.
  void check_tensor_total(size_t tensors) const;

 private:
  SplitKeys keys_;
  std::vector<std::string> paths_;
};

}  // namespace epq::gguf
