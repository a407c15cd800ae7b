#include "gguf/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gguf/split.h"
#include "util/error.h"
#include "util/mapping_guard.h"
#include "util/regular_file.h"

namespace epq::gguf {
namespace {

constexpr int kMaxArrayNesting = 8;
// Metadata held in memory (a large tokenizer takes some tens of MiB). Elements take more
// room parsed than in the file (a uint8 becomes an int64), so this is counted too.
constexpr uint64_t kMaxMetadataMemory = uint64_t{256} << 20;

// Bounds-checked little-endian reader over the file image. Every failure names the
// file, what was being read and where.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& label) : bytes_(bytes), label_(label) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  template <typename T>
  T read(const char* what) {
    if (remaining() < sizeof(T)) {
      fail("{}: truncated header: file ends at byte {} while reading {} at offset {}", label_,
           bytes_.size(), what, pos_);
    }
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    uint64_t at = pos_;
    uint64_t n = read<uint64_t>(what);
    if (n > remaining()) {
      fail("{}: {} at offset {} has length {}, past the end of the file ({} bytes)", label_, what,
           at, n, bytes_.size());
    }
    charge_memory(n, at);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  // Counts bytes the parsed metadata will hold; refuses a header that needs too many.
  void charge_memory(uint64_t bytes, uint64_t at) {
    memory_ += bytes;
    if (memory_ > kMaxMetadataMemory) {
      fail("{}: the metadata at offset {} would take more than {} MiB of memory", label_, at, kMaxMetadataMemory >> 20);
    }
  }

  // An element count claims at least count*min_bytes more bytes: check before allocating.
  void check_count(uint64_t count, uint64_t min_bytes, const char* what, uint64_t at) {
    if (min_bytes != 0 && count > remaining() / min_bytes) {
      fail("{}: {} at offset {} claims {} elements, past the end of the file ({} bytes)", label_,
           what, at, count, bytes_.size());
    }
  }

  const std::string& label() const { return label_; }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& label_;
  uint64_t pos_ = 0;
  uint64_t memory_ = 0;
};

uint64_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;   // at least the length
    case ValueType::ARRAY: return 12;   // at least type + count
  }
  return 0;
}

ValueType read_value_type(Cursor& c, const std::string& key) {
  uint64_t at = c.pos();
  uint32_t raw = c.read<uint32_t>("a value type");
  if (raw > static_cast<uint32_t>(ValueType::FLOAT64)) {
    fail("{}: metadata key '{}' has unknown value type {} at offset {}", c.label(), key, raw, at);
  }
  return static_cast<ValueType>(raw);
}

Value read_value(Cursor& c, ValueType type, const std::string& key, int depth) {
  switch (type) {
    case ValueType::UINT8: return Value::integer(type, c.read<uint8_t>("a uint8"));
    case ValueType::INT8: return Value::integer(type, c.read<int8_t>("an int8"));
    case ValueType::UINT16: return Value::integer(type, c.read<uint16_t>("a uint16"));
    case ValueType::INT16: return Value::integer(type, c.read<int16_t>("an int16"));
    case ValueType::UINT32: return Value::integer(type, c.read<uint32_t>("a uint32"));
    case ValueType::INT32: return Value::integer(type, c.read<int32_t>("an int32"));
    case ValueType::UINT64: return Value::u64(c.read<uint64_t>("a uint64"));
    case ValueType::INT64: return Value::integer(type, c.read<int64_t>("an int64"));
    case ValueType::FLOAT32: return Value::floating(type, c.read<float>("a float32"));
    case ValueType::FLOAT64: return Value::floating(type, c.read<double>("a float64"));
    case ValueType::BOOL: return Value::integer(type, c.read<uint8_t>("a bool") != 0);
    case ValueType::STRING: return Value::string(c.read_string("a string value"));
    case ValueType::ARRAY: {
      if (depth >= kMaxArrayNesting) {
        fail("{}: metadata key '{}' nests arrays deeper than {}", c.label(), key, kMaxArrayNesting);
      }
      ValueType elem = read_value_type(c, key);
      uint64_t at = c.pos();
      uint64_t n = c.read<uint64_t>("an array length");
      c.check_count(n, scalar_size(elem), "array", at);
      const uint64_t element_memory = elem == ValueType::STRING ? sizeof(std::string) : elem == ValueType::ARRAY ? sizeof(Value) : 8;
      c.charge_memory(n * element_memory, at);  // n is at most the file size, so this does not overflow
      if (elem == ValueType::STRING) {
        std::vector<std::string> v;
        v.reserve(n);
        for (uint64_t i = 0; i < n; ++i) v.push_back(c.read_string("an array string"));
        return Value::string_array(std::move(v));
      }
      if (elem == ValueType::ARRAY) {
        std::vector<Value> v;
        v.reserve(n);
        for (uint64_t i = 0; i < n; ++i) v.push_back(read_value(c, elem, key, depth + 1));
        return Value::array(elem, std::move(v));
      }
      if (is_float(elem)) {
        std::vector<double> v(n);
        for (uint64_t i = 0; i < n; ++i) v[i] = read_value(c, elem, key, depth + 1).as_float();
        return Value::float_array(elem, std::move(v));
      }
      std::vector<int64_t> v(n);
      for (uint64_t i = 0; i < n; ++i) v[i] = read_value(c, elem, key, depth + 1).as_int();
      return Value::int_array(elem, std::move(v));
    }
  }
  fail("{}: metadata key '{}' has an unknown value type", c.label(), key);
}

}  // namespace

std::string TensorInfo::shape_string() const {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

File File::open(const std::string& path, Access access) {
  File model = open_one(path, access);
  const SplitSet split(model);
  for (int no = 1; no < split.count(); ++no) {
    split.check_present(no);
    File shard = open_one(split.shard_path(no), access);
    split.check_shard(no, shard);
    model.adopt_shard(std::move(shard));
  }
  split.check_tensor_total(model.tensors_.size());
  return model;
}

File File::open_one(const std::string& path, Access access) {
  struct stat st {};
  const int fd = open_regular_file(path, O_RDONLY, &st);
  if (st.st_size == 0) {
    ::close(fd);
    fail("{}: file is empty, not a GGUF model", path);
  }
  void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  int map_errno = errno;
  if (map == MAP_FAILED) {
    ::close(fd);
    fail("{}: cannot map: {}", path, std::strerror(map_errno));
  }
  guard_mapping(map, static_cast<size_t>(st.st_size), path);
  File f;
  Mapping& m = f.mappings_.emplace_back(Mapping{static_cast<const uint8_t*>(map), static_cast<size_t>(st.st_size)});
  if (access == Access::kHeaderOnly) {
    madvise(map, m.size, MADV_RANDOM);
    m.header_fd = fd;
  } else {
    // Page faults then read the file in 2 MiB folios, mapped one TLB entry each: all in RAM,
    // the 4 KiB pages of a 16 GB model cost its decode half its speed (docs/PERFORMANCE.md).
    // Best effort: without transparent huge pages in the kernel this fails and nothing changes.
    madvise(map, m.size, MADV_HUGEPAGE);
    ::close(fd);
  }
  f.parse_image({m.data, m.size}, path);  // on throw, ~File unmaps
  f.mappings_[0].header_bytes = f.shards_[0].data_offset;
  return f;
}

File File::parse(std::span<const uint8_t> bytes, const std::string& label) {
  File f;
  f.parse_image(bytes, label);
  return f;
}

void File::adopt_shard(File&& shard) {
  const uint32_t no = static_cast<uint32_t>(shards_.size());
  tensors_.reserve(tensors_.size() + shard.tensors_.size());
  for (TensorInfo& t : shard.tensors_) {
    auto [it, added] = tensor_index_.emplace(t.name, tensors_.size());
    if (!added) {
      fail("{}: tensor '{}' is also in {}: a shard given twice, or one of another model", shard.path(), t.name,
           shards_[tensors_[it->second].shard].path);
    }
    t.shard = no;
    tensors_.push_back(std::move(t));
  }
  shards_.push_back(std::move(shard.shards_[0]));
  if (!shard.mappings_.empty()) mappings_.push_back(std::exchange(shard.mappings_[0], Mapping{}));
}

void File::parse_image(std::span<const uint8_t> bytes, const std::string& label) {
  Shard& shard = shards_.emplace_back(Shard{label, bytes.size()});
  const std::string& path = shard.path;
  const uint64_t file_size = shard.file_size;
  Cursor c(bytes, path);
  if (bytes.size() < 4 || c.read<uint32_t>("the magic") != kMagic) {
    fail("{}: bad magic: not a GGUF file", path);
  }
  version_ = c.read<uint32_t>("the version");
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xFFFF) == 0 && version_ != 0) {
      fail("{}: GGUF file is big-endian; only little-endian files are supported", path);
    }
    fail("{}: unsupported GGUF version {} (supported: 2, 3)", path, version_);
  }
  uint64_t n_tensors = c.read<uint64_t>("the tensor count");
  uint64_t n_kv = c.read<uint64_t>("the metadata count");
  c.check_count(n_kv, 8 + 4, "metadata count", 16);

  metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    uint64_t at = c.pos();
    std::string key = c.read_string("a metadata key");
    ValueType type = read_value_type(c, key);
    Value v = read_value(c, type, key, 0);
    if (!key_index_.emplace(key, metadata_.size()).second) {
      fail("{}: duplicate metadata key '{}' at offset {}", path, key, at);
    }
    metadata_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = find("general.alignment")) {
    if (a->type() != ValueType::UINT32 || a->as_int() == 0 || (a->as_int() & (a->as_int() - 1)) != 0) {
      fail("{}: general.alignment must be a power-of-two uint32, got {} {}", path,
           type_name(a->type()), a->to_display());
    }
    shard.alignment = a->as_uint();
  }

  c.check_count(n_tensors, 8 + 4 + 4 + 8, "tensor count", 8);
  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    uint64_t at = c.pos();
    TensorInfo t;
    t.name = c.read_string("a tensor name");
    uint32_t n_dims = c.read<uint32_t>("a tensor's dimension count");
    if (n_dims == 0 || n_dims > kMaxDims) {
      fail("{}: tensor '{}' has {} dimensions (1 to {} allowed)", path, t.name, n_dims, kMaxDims);
    }
    t.n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      int64_t ne = c.read<int64_t>("a tensor dimension");
      if (ne < 0) fail("{}: tensor '{}' has negative dimension {}", path, t.name, ne);
      if (__builtin_mul_overflow(t.n_elements, ne, &t.n_elements)) {
        fail("{}: tensor '{}' dimensions overflow: their product exceeds 2^63", path, t.name);
      }
      t.dims.push_back(ne);
    }
    uint32_t type_id = c.read<uint32_t>("a tensor type");
    const quant::TypeInfo* ti = quant::find_type(type_id);
    if (ti == nullptr) fail("{}: tensor '{}' has unknown type id {}", path, t.name, type_id);
    t.type = ti->type;
    if (t.dims[0] % ti->block_elems != 0) {
      fail("{}: tensor '{}' row of {} elements is not a multiple of the {} block size {}", path,
           t.name, t.dims[0], ti->name, ti->block_elems);
    }
    t.bytes = static_cast<uint64_t>(t.n_elements / ti->block_elems) * static_cast<uint64_t>(ti->block_bytes);
    if (t.n_elements / ti->block_elems > INT64_MAX / ti->block_bytes) {
      fail("{}: tensor '{}' byte size overflows", path, t.name);
    }
    t.offset = c.read<uint64_t>("a tensor offset");
    if (t.offset % shard.alignment != 0) {
      fail("{}: tensor '{}' offset {} is not a multiple of the alignment {}", path, t.name,
           t.offset, shard.alignment);
    }
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      fail("{}: duplicate tensor name '{}' at offset {}", path, t.name, at);
    }
    tensors_.push_back(std::move(t));
  }

  uint64_t header_end = c.pos();
  const uint64_t alignment = shard.alignment;
  const uint64_t data_offset = n_tensors == 0 ? header_end : (header_end + alignment - 1) / alignment * alignment;
  shard.data_offset = data_offset;
  shard.n_tensors = tensors_.size();
  for (TensorInfo& t : tensors_) {
    uint64_t rel = t.offset;
    if (rel > file_size || data_offset > file_size - rel || t.bytes > file_size - rel - data_offset) {
      fail("{}: truncated data: tensor '{}' ({} bytes at data offset {}) extends past the end of "
           "the file ({} bytes)", path, t.name, t.bytes, rel, file_size);
    }
    t.offset = data_offset + rel;
  }
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    if (a.offset + a.bytes > by_offset[i]->offset) {
      fail("{}: tensor data overlaps: '{}' and '{}'", path, a.name, by_offset[i]->name);
    }
  }
}

File::File(File&& other) noexcept { *this = std::move(other); }

File& File::operator=(File&& other) noexcept {
  if (this == &other) return *this;
  unmap();
  version_ = other.version_;
  shards_ = std::move(other.shards_);
  mappings_ = std::exchange(other.mappings_, {});
  metadata_ = std::move(other.metadata_);
  key_index_ = std::move(other.key_index_);
  tensors_ = std::move(other.tensors_);
  tensor_index_ = std::move(other.tensor_index_);
  return *this;
}

File::~File() { unmap(); }

void File::unmap() {
  for (Mapping& m : mappings_) {
    if (m.data != nullptr) {
      unguard_mapping(m.data);
      munmap(const_cast<uint8_t*>(m.data), m.size);
    }
    if (m.header_fd >= 0) {
      posix_fadvise(m.header_fd, 0, static_cast<off_t>(m.header_bytes), POSIX_FADV_DONTNEED);
      ::close(m.header_fd);
    }
  }
  mappings_.clear();
}

std::vector<std::string> File::shard_paths() const {
  std::vector<std::string> paths;
  for (const Shard& s : shards_) paths.push_back(s.path);
  return paths;
}

const uint8_t* File::mapping(uint32_t shard) const { return shard < mappings_.size() ? mappings_[shard].data : nullptr; }

const Value* File::find(std::string_view key) const {
  auto it = key_index_.find(std::string(key));
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

namespace {
[[noreturn]] void missing(const std::string& path, std::string_view key) {
  fail("{}: required metadata key '{}' is missing", path, key);
}
[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const Value& v,
                             const char* expected) {
  fail("{}: metadata key '{}' is {}, expected {}", path, key, type_name(v.type()), expected);
}
}  // namespace

int64_t File::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) missing(path(), key);
  if (!is_integer(v->type())) wrong_type(path(), key, *v, "an integer");
  return v->as_int();
}

int64_t File::get_int_or(std::string_view key, int64_t fallback) const {
  return find(key) ? get_int(key) : fallback;
}

double File::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) missing(path(), key);
  if (is_integer(v->type()) && v->type() != ValueType::BOOL) return static_cast<double>(v->as_int());
  if (!is_float(v->type())) wrong_type(path(), key, *v, "a number");
  return v->as_float();
}

double File::get_float_or(std::string_view key, double fallback) const {
  return find(key) ? get_float(key) : fallback;
}

bool File::get_bool_or(std::string_view key, bool fallback) const {
  const Value* v = find(key);
  if (v == nullptr) return fallback;
  if (v->type() != ValueType::BOOL) wrong_type(path(), key, *v, "a bool");
  return v->as_int() != 0;
}

const std::string& File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) missing(path(), key);
  if (v->type() != ValueType::STRING) wrong_type(path(), key, *v, "a string");
  return v->as_string();
}

std::string File::get_string_or(std::string_view key, const std::string& fallback) const {
  return find(key) ? get_string(key) : fallback;
}

const Value& File::get_array(std::string_view key, ValueType elem_type) const {
  const Value* v = find(key);
  if (v == nullptr) missing(path(), key);
  bool ok = v->type() == ValueType::ARRAY &&
            (v->elem_type() == elem_type || (is_integer(elem_type) && is_integer(v->elem_type())) ||
             (is_float(elem_type) && is_float(v->elem_type())));
  if (!ok) {
    fail("{}: metadata key '{}' is {}, expected an array of {}", path(), key,
         v->type() == ValueType::ARRAY ? fmt::format("an array of {}", type_name(v->elem_type()))
                                       : type_name(v->type()),
         type_name(elem_type));
  }
  return *v;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> File::tensor_data(const TensorInfo& tensor) const {
  const uint8_t* base = mapping(tensor.shard);
  if (base == nullptr) fail("{}: internal: tensor data requested but the file is not mapped", shards_[tensor.shard].path);
  return {base + tensor.offset, tensor.bytes};
}

}  // namespace epq::gguf
