#include "gguf/split_writer.h"

#include "gguf/split.h"
#include "gguf/writer.h"
#include "util/error.h"

namespace epq::gguf {
namespace {

bool is_split_key(std::string_view key) { return key == kSplitNoKey || key == kSplitCountKey || key == kSplitTensorsCountKey; }

}  // namespace

std::vector<int> shards_by_count(std::span<const uint64_t> tensor_bytes, int shards) {
  const size_t n = tensor_bytes.size();
  if (shards < 1 || static_cast<size_t>(shards) > n) fail("cannot split {} tensors into {} shards", n, shards);
  uint64_t total = 0;
  for (uint64_t b : tensor_bytes) total += b;
  std::vector<int> shard_of(n);
  int shard = 0;
  uint64_t done = 0;  // bytes of the tensors before this one
  bool empty = true;  // the current shard has no tensor yet
  for (size_t i = 0; i < n; ++i) {
    const uint64_t shards_after = static_cast<uint64_t>(shards - 1 - shard);
    // Move on once this shard has its share, or when each tensor left must open a shard.
    const bool share_done = shards_after > 0 && done >= static_cast<uint64_t>(shard + 1) * (total / static_cast<uint64_t>(shards));
    if (!empty && (share_done || n - i == shards_after)) {
      ++shard;
      empty = true;
    }
    shard_of[i] = shard;
    done += tensor_bytes[i];
    empty = false;
  }
  return shard_of;
}

std::vector<int> shards_by_size(std::span<const uint64_t> tensor_bytes, uint64_t max_bytes) {
  std::vector<int> shard_of(tensor_bytes.size());
  int shard = 0;
  uint64_t in_shard = 0;  // bytes of the current shard's tensors
  bool empty = true;
  for (size_t i = 0; i < tensor_bytes.size(); ++i) {
    if (!empty && tensor_bytes[i] > max_bytes - std::min(max_bytes, in_shard)) {
      if (++shard >= kMaxShards) fail("more than {} shards of at most {} bytes each", kMaxShards, max_bytes);
      in_shard = 0;
    }
    shard_of[i] = shard;
    in_shard += tensor_bytes[i];
    empty = false;
  }
  return shard_of;
}

std::vector<std::string> write_split(const File& model, const std::string& prefix, const std::vector<int>& shard_of) {
  const std::vector<TensorInfo>& tensors = model.tensors();
  bool in_order = !tensors.empty() && shard_of.size() == tensors.size() && shard_of[0] == 0;
  for (size_t t = 1; in_order && t < shard_of.size(); ++t) in_order = shard_of[t] == shard_of[t - 1] || shard_of[t] == shard_of[t - 1] + 1;
  if (!in_order) fail("{}: internal: the shards of the split are not numbered in order", model.path());
  const int n = shard_of.back() + 1;
  if (n > kMaxShards) fail("{} shards are more than the gguf-split layout's {}", n, kMaxShards);
  std::vector<std::string> paths;
  size_t next = 0;  // the first tensor of the shard being written
  for (int no = 0; no < n; ++no) {
    size_t end = next;
    while (end < tensors.size() && shard_of[end] == no) ++end;
    paths.push_back(split_path(prefix, no, n));
    Writer w(paths.back(), model.shards()[0].alignment);
    if (no == 0) {
      for (const auto& [key, value] : model.metadata()) {
        if (!is_split_key(key)) w.set(key, value);
      }
    }
    w.set(std::string(kSplitNoKey), Value::integer(ValueType::UINT16, no));
    w.set(std::string(kSplitCountKey), Value::integer(ValueType::UINT16, n));
    w.set(std::string(kSplitTensorsCountKey), Value::integer(ValueType::INT32, static_cast<int64_t>(tensors.size())));
    for (size_t t = next; t < end; ++t) w.add_tensor(tensors[t].name, tensors[t].type, tensors[t].dims);
    w.begin_data();
    for (size_t t = next; t < end; ++t) w.write_data(model.tensor_data(tensors[t]));
    w.finish();
    next = end;
  }
  return paths;
}

}  // namespace epq::gguf
