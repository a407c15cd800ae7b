#include "gguf/writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace epq::gguf {

Writer::Writer(std::string path, uint64_t alignment)
    : path_(std::move(path)), temp_path_(path_ + ".partial"), alignment_(alignment) {
  if (alignment_ != kDefaultAlignment) {
    set("general.alignment", Value::integer(ValueType::UINT32, static_cast<int64_t>(alignment_)));
  }
}

Writer::~Writer() {
  if (out_ != nullptr) {  // abandoned before finish(): remove the partial file
    std::fclose(out_);
    std::remove(temp_path_.c_str());
  }
}

void Writer::set(std::string key, Value value) {
  for (auto& kv : metadata_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void Writer::add_tensor(std::string name, quant::Type type, std::vector<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (dims.empty() || dims[0] % quant::info(type).block_elems != 0) {
    fail("tensor '{}': row of {} elements is not a multiple of the {} block size", name,
         dims.empty() ? 0 : dims[0], quant::name(type));
  }
  uint64_t bytes = static_cast<uint64_t>(quant::row_bytes(type, n));
  tensors_.push_back({std::move(name), type, std::move(dims), next_offset_, bytes});
  next_offset_ = (next_offset_ + bytes + alignment_ - 1) / alignment_ * alignment_;
}

void Writer::write_raw(const void* data, size_t n) {
  if (std::fwrite(data, 1, n, out_) != n) {
    fail("{}: write failed: {}", temp_path_, std::strerror(errno));
  }
  written_ += n;
}

void Writer::pad_to(uint64_t multiple) {
  static const char zeros[256] = {};
  while (written_ % multiple != 0) {
    write_raw(zeros, static_cast<size_t>(std::min<uint64_t>(sizeof zeros, multiple - written_ % multiple)));
  }
}

namespace {

template <typename T>
void append(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void append_string(std::vector<uint8_t>& out, const std::string& s) {
  append<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void append_scalar(std::vector<uint8_t>& out, ValueType t, int64_t i, double f) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: append<uint8_t>(out, static_cast<uint8_t>(i)); break;
    case ValueType::UINT16: case ValueType::INT16: append<uint16_t>(out, static_cast<uint16_t>(i)); break;
    case ValueType::UINT32: case ValueType::INT32: append<uint32_t>(out, static_cast<uint32_t>(i)); break;
    case ValueType::UINT64: case ValueType::INT64: append<uint64_t>(out, static_cast<uint64_t>(i)); break;
    case ValueType::FLOAT32: append<float>(out, static_cast<float>(f)); break;
    case ValueType::FLOAT64: append<double>(out, f); break;
    default: break;
  }
}

void append_value(std::vector<uint8_t>& out, const Value& v) {
  if (v.type() == ValueType::STRING) return append_string(out, v.as_string());
  if (v.type() != ValueType::ARRAY) return append_scalar(out, v.type(), v.as_int(), v.as_float());
  append<uint32_t>(out, static_cast<uint32_t>(v.elem_type()));
  append<uint64_t>(out, v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    switch (v.elem_type()) {
      case ValueType::STRING: append_string(out, v.strings()[i]); break;
      case ValueType::ARRAY: append_value(out, v.arrays()[i]); break;
      default:
        append_scalar(out, v.elem_type(), is_float(v.elem_type()) ? 0 : v.ints()[i],
                      is_float(v.elem_type()) ? v.floats()[i] : 0);
    }
  }
}

}  // namespace

void Writer::begin_data() {
  out_ = std::fopen(temp_path_.c_str(), "wb");
  if (out_ == nullptr) fail("{}: cannot create: {}", temp_path_, std::strerror(errno));
  buffer_.resize(8 << 20);
  std::setvbuf(out_, buffer_.data(), _IOFBF, buffer_.size());

  std::vector<uint8_t> header;
  append<uint32_t>(header, kMagic);
  append<uint32_t>(header, 3);
  append<uint64_t>(header, tensors_.size());
  append<uint64_t>(header, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    append_string(header, key);
    append<uint32_t>(header, static_cast<uint32_t>(value.type()));
    append_value(header, value);
  }
  for (const Pending& t : tensors_) {
    append_string(header, t.name);
    append<uint32_t>(header, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) append<int64_t>(header, d);
    append<uint32_t>(header, static_cast<uint32_t>(t.type));
    append<uint64_t>(header, t.offset);
  }
  write_raw(header.data(), header.size());
  pad_to(alignment_);
  written_ = 0;  // from here on, count data-section bytes
}

void Writer::write_data(std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    if (current_ >= tensors_.size()) fail("{}: more tensor data written than declared", temp_path_);
    const Pending& t = tensors_[current_];
    size_t n = static_cast<size_t>(std::min<uint64_t>(bytes.size(), t.bytes - current_written_));
    write_raw(bytes.data(), n);
    bytes = bytes.subspan(n);
    current_written_ += n;
    if (current_written_ == t.bytes) {
      pad_to(alignment_);
      ++current_;
      current_written_ = 0;
    }
  }
}

void Writer::finish() {
  if (current_ != tensors_.size()) {
    fail("{}: only {} of {} tensors were written", temp_path_, current_, tensors_.size());
  }
  bool ok = std::fflush(out_) == 0 && fsync(fileno(out_)) == 0;
  ok = std::fclose(out_) == 0 && ok;
  out_ = nullptr;
  if (!ok) {
    std::remove(temp_path_.c_str());
    fail("{}: write failed: {}", temp_path_, std::strerror(errno));
  }
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    fail("cannot rename {} to {}: {}", temp_path_, path_, std::strerror(errno));
  }
}

}  // namespace epq::gguf
