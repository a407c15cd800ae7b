#pragma once
// Reader of GGUF v2/v3 models (little-endian): one file, or the shards of a split model
// (gguf/split.h) read as one. open() maps every file and validates every header and the
// shards against each other: every later accessor can trust what it returns. Metadata is
// the first shard's; tensors are those of all shards, each knowing its shard. Any
// malformed input becomes an epq::Error whose message names the file and what is wrong.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gguf/value.h"
#include "quant/types.h"

namespace epq::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian uint32
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;

struct TensorInfo {
  std::string name;
  quant::Type type;
  std::vector<int64_t> dims;  // ne0 (fastest varying) first
  int64_t n_elements = 0;
  uint32_t shard = 0;   // the file holding it: File::shards()[shard]
  uint64_t offset = 0;  // absolute byte offset in that file
  uint64_t bytes = 0;
  // Tensors of 2+ dims are rows of dims[0] elements.
  uint64_t row_bytes() const { return static_cast<uint64_t>(quant::row_bytes(type, dims[0])); }
  std::string shape_string() const;
};

// One file of a model: the whole model, or one shard of a split one.
struct Shard {
  std::string path;
  uint64_t file_size = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;  // where its data section starts
  size_t n_tensors = 0;
};

class File {
 public:
  // kAll: the whole file will be read through the mapping (normal readahead, in huge
  // pages where the kernel has them).
  // kHeaderOnly: only the header is read here; no readahead, and unmap() drops the
  // header's pages from the page cache, so tensor data never enters it through us.
  enum class Access { kAll, kHeaderOnly };
  // `path` is the model's file, or the first shard of a split model: the others are
  // found by their gguf-split names.
  static File open(const std::string& path, Access access = Access::kAll);
  // Parses an in-memory image of one file (no mapping is kept; tensor_data is
  // unavailable).
  static File parse(std::span<const uint8_t> bytes, const std::string& label);

  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  // The model's path (its first shard's), as given to open().
  const std::string& path() const { return shards_[0].path; }
  uint32_t version() const { return version_; }
  const std::vector<Shard>& shards() const { return shards_; }
  std::vector<std::string> shard_paths() const;

  // Metadata in file order, and typed lookups. The get_* functions throw an Error that
  // names the key when it is missing or of the wrong type.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  int64_t get_int(std::string_view key) const;  // any integer type
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key) const;  // float32 or float64
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;
  const std::string& get_string(std::string_view key) const;
  std::string get_string_or(std::string_view key, const std::string& fallback) const;
  const Value& get_array(std::string_view key, ValueType elem_type) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // The tensor's bytes inside its shard's mapping; only for files from open() that are
  // mapped.
  std::span<const uint8_t> tensor_data(const TensorInfo& tensor) const;
  // Start of a shard's mapping (null if not mapped): tensor t's data is at
  // mapping(t.shard) + t.offset.
  const uint8_t* mapping(uint32_t shard) const;
  // Drops the mappings (metadata and the tensor index stay valid).
  void unmap();

 private:
  struct Mapping {
    const uint8_t* data = nullptr;
    size_t size = 0;
    int header_fd = -1;  // kHeaderOnly: kept to drop the header's pages at unmap()
    uint64_t header_bytes = 0;
  };

  File() = default;
  static File open_one(const std::string& path, Access access);
  void parse_image(std::span<const uint8_t> bytes, const std::string& label);
  // Moves the tensors and the mapping of `shard` (one file, just opened) into this model.
  void adopt_shard(File&& shard);

  uint32_t version_ = 0;
  std::vector<Shard> shards_;
  std::vector<Mapping> mappings_;  // one per shard when mapped, else none
  std::vector<std::pair<std::string, Value>> metadata_;
  std::unordered_map<std::string, size_t> key_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace epq::gguf
