#include "gguf/split.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <filesystem>

#include <fmt/format.h>

#include "gguf/file.h"
#include "util/error.h"

namespace epq::gguf {
namespace {

constexpr std::string_view kOf = "-of-";
constexpr std::string_view kSuffix = ".gguf";
constexpr size_t kDigits = 5;

// Five decimal digits at s[at..], or -1.
int five_digits(std::string_view s, size_t at) {
  int v = -1;
  const char* begin = s.data() + at;
  if (s.size() < at + kDigits || std::from_chars(begin, begin + kDigits, v).ptr != begin + kDigits) return -1;
  return v;
}

// A split key of a shard as an integer in [lo, hi]; names the file and key when not.
int64_t key_in_range(const File& shard, std::string_view key, int64_t lo, int64_t hi) {
  const int64_t v = shard.get_int(key);
  if (v < lo || v > hi) fail("{}: {} is {}, expected {} to {}", shard.path(), key, v, lo, hi);
  return v;
}

std::string shard_words(int no, int count) { return fmt::format("shard {} of {}", no + 1, count); }

}  // namespace

std::string split_path(std::string_view prefix, int no, int count) {
  return fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, no + 1, count);
}

std::optional<SplitName> parse_split_name(std::string_view path) {
  // "<prefix>-NNNNN-of-MMMMM.gguf": 1 + 5 + 4 + 5 + 5 characters after the prefix.
  const size_t tail = 1 + kDigits + kOf.size() + kDigits + kSuffix.size();
  if (path.size() <= tail || !path.ends_with(kSuffix)) return std::nullopt;
  const size_t at = path.size() - tail;
  if (path[at] != '-' || path.substr(at + 1 + kDigits, kOf.size()) != kOf) return std::nullopt;
  const int no = five_digits(path, at + 1), count = five_digits(path, at + 1 + kDigits + kOf.size());
  if (no < 1 || count < 1 || no > count) return std::nullopt;
  return SplitName{std::string(path.substr(0, at)), no - 1, count};
}

std::string model_name(std::string_view path) {
  const std::optional<SplitName> split = parse_split_name(path);
  const std::filesystem::path file(split ? split->prefix + std::string(kSuffix) : std::string(path));
  return file.stem().string();
}

SplitKeys read_split_keys(const File& shard) {
  const bool any = shard.find(kSplitNoKey) || shard.find(kSplitCountKey) || shard.find(kSplitTensorsCountKey);
  if (!any) return {false, 0, 1, static_cast<int64_t>(shard.tensors().size())};
  SplitKeys k;
  k.present = true;
  k.count = static_cast<int>(key_in_range(shard, kSplitCountKey, 1, kMaxShards));
  k.no = static_cast<int>(key_in_range(shard, kSplitNoKey, 0, kMaxShards - 1));
  k.tensors = key_in_range(shard, kSplitTensorsCountKey, 0, INT32_MAX);
  if (k.no >= k.count) fail("{}: {} is {}, but {} is {}: no such shard", shard.path(), kSplitNoKey, k.no, kSplitCountKey, k.count);
  return k;
}

SplitSet::SplitSet(const File& first) : keys_(read_split_keys(first)) {
  const std::string& path = first.path();
  const std::optional<SplitName> name = parse_split_name(path);
  if (keys_.present && name && (name->no != keys_.no || name->count != keys_.count)) {
    fail("{}: named as {}, but its split keys say it is {}", path, shard_words(name->no, name->count), shard_words(keys_.no, keys_.count));
  }
  if (keys_.no != 0) {
    fail("{}: this is {} of a split model; give the first shard, {}", path, shard_words(keys_.no, keys_.count),
         name ? split_path(name->prefix, 0, keys_.count) : "the one whose split.no is 0");
  }
  if (keys_.count > 1 && !name) {
    fail("{}: the first of {} shards, but not named <prefix>-00001-of-{:05d}.gguf, so the other shards cannot be found; "
         "restore the gguf-split names",
         path, keys_.count, keys_.count);
  }
  paths_.push_back(path);
  for (int no = 1; no < keys_.count; ++no) paths_.push_back(split_path(name->prefix, no, keys_.count));
}

void SplitSet::check_present(int no) const {
  struct stat st {};
  const std::string& path = shard_path(no);
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
    fail("{}: missing: the model {} has {} shards and this is shard {}", path, paths_[0], keys_.count, no + 1);
  }
}

void SplitSet::check_shard(int no, const File& shard) const {
  const SplitKeys k = read_split_keys(shard);
  const std::string& path = shard.path();
  if (!k.present) fail("{}: has no split keys, so it is not {} of {}", path, shard_words(no, keys_.count), paths_[0]);
  if (k.count != keys_.count) {
    fail("{}: {} is {}, but the first shard {} says {}: a shard of another split", path, kSplitCountKey, k.count, paths_[0], keys_.count);
  }
  if (k.no != no) fail("{}: {} is {} ({}), but the file is named as shard {}", path, kSplitNoKey, k.no, shard_words(k.no, k.count), no + 1);
  if (k.tensors != keys_.tensors) {
    fail("{}: {} is {}, but the first shard {} says {}: a shard of another model", path, kSplitTensorsCountKey, k.tensors, paths_[0],
         keys_.tensors);
  }
}

void SplitSet::check_tensor_total(size_t tensors) const {
  if (keys_.present && static_cast<int64_t>(tensors) != keys_.tensors) {
    fail("{}: its {} shards hold {} tensors, but {} says {}", paths_[0], keys_.count, tensors, kSplitTensorsCountKey, keys_.tensors);
  }
}

}  // namespace epq::gguf
