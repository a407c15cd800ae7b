#pragma once
// Reader of GGUF v2/v3 files (little-endian). open() maps the file and validates the
// whole header: every later accessor can trust what it returns. Any malformed input
// becomes an epq::Error whose message names the file and what is wrong with it.
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
  uint64_t offset = 0;  // absolute byte offset in the file
  uint64_t bytes = 0;
  // Tensors of 2+ dims are rows of dims[0] elements.
  uint64_t row_bytes() const { return static_cast<uint64_t>(quant::row_bytes(type, dims[0])); }
  std::string shape_string() const;
};

class File {
 public:
  // kAll: the whole file will be read through the mapping (normal readahead).
  // kHeaderOnly: only the header is read here; no readahead, and unmap() drops the
  // header's pages from the page cache, so tensor data never enters it through us.
  enum class Access { kAll, kHeaderOnly };
  static File open(const std::string& path, Access access = Access::kAll);
  // Parses an in-memory image (no mapping is kept; tensor_data is unavailable).
  static File parse(std::span<const uint8_t> bytes, const std::string& label);

  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return file_size_; }

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
  // The tensor's bytes inside the mapping; only for files from open() that are mapped.
  std::span<const uint8_t> tensor_data(const TensorInfo& tensor) const;
  // Start of the file's mapping (null if not mapped): tensor data is at mapping() + offset.
  const uint8_t* mapping() const { return map_; }
  // Drops the mapping (metadata and the tensor index stay valid).
  void unmap();

 private:
  File() = default;
  void parse_image(std::span<const uint8_t> bytes);

  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  uint64_t file_size_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::unordered_map<std::string, size_t> key_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  const uint8_t* map_ = nullptr;
  size_t map_size_ = 0;
  int header_fd_ = -1;  // kHeaderOnly: kept to drop the header's pages at unmap()
};

}  // namespace epq::gguf
