#include "gguf/value.h"

#include <fmt/format.h>

namespace epq::gguf {

const char* type_name(ValueType type) {
  switch (type) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

bool is_integer(ValueType type) {
  switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
    case ValueType::BOOL:
      return true;
    default:
      return false;
  }
}

bool is_float(ValueType type) { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }

Value Value::integer(ValueType type, int64_t v) {
  Value out;
  out.type_ = type;
  out.int_ = v;
  return out;
}

Value Value::u64(uint64_t v) { return integer(ValueType::UINT64, static_cast<int64_t>(v)); }

Value Value::floating(ValueType type, double v) {
  Value out;
  out.type_ = type;
  out.float_ = v;
  return out;
}

Value Value::string(std::string v) {
  Value out;
  out.type_ = ValueType::STRING;
  out.string_ = std::move(v);
  return out;
}

Value Value::array(ValueType elem_type, std::vector<Value> elems) {
  Value out;
  out.type_ = ValueType::ARRAY;
  out.elem_type_ = elem_type;
  if (elem_type == ValueType::ARRAY) {
    out.arrays_ = std::move(elems);
  } else {
    for (Value& e : elems) {
      if (elem_type == ValueType::STRING) out.strings_.push_back(std::move(e.string_));
      else if (is_float(elem_type)) out.floats_.push_back(e.float_);
      else out.ints_.push_back(e.int_);
    }
  }
  return out;
}

Value Value::string_array(std::vector<std::string> v) {
  Value out;
  out.type_ = ValueType::ARRAY;
  out.elem_type_ = ValueType::STRING;
  out.strings_ = std::move(v);
  return out;
}

Value Value::int_array(ValueType elem_type, std::vector<int64_t> v) {
  Value out;
  out.type_ = ValueType::ARRAY;
  out.elem_type_ = elem_type;
  out.ints_ = std::move(v);
  return out;
}

Value Value::float_array(ValueType elem_type, std::vector<double> v) {
  Value out;
  out.type_ = ValueType::ARRAY;
  out.elem_type_ = elem_type;
  out.floats_ = std::move(v);
  return out;
}

size_t Value::size() const {
  switch (elem_type_) {
    case ValueType::STRING: return strings_.size();
    case ValueType::ARRAY: return arrays_.size();
    default: return is_float(elem_type_) ? floats_.size() : ints_.size();
  }
}

namespace {

std::string quote(const std::string& s, size_t max_chars) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  if (s.size() > max_chars) out += fmt::format("...\" ({} bytes)", s.size());
  else out += "\"";
  return out;
}

std::string scalar(ValueType type, int64_t i, double f) {
  if (type == ValueType::BOOL) return i ? "true" : "false";
  if (type == ValueType::UINT64) return fmt::format("{}", static_cast<uint64_t>(i));
  if (type == ValueType::FLOAT32) return fmt::format("{}", static_cast<float>(f));
  if (is_float(type)) return fmt::format("{}", f);
  return fmt::format("{}", i);
}

}  // namespace

std::string Value::to_display(size_t max_items) const {
  if (type_ == ValueType::STRING) return quote(string_, 120);
  if (type_ != ValueType::ARRAY) return scalar(type_, int_, float_);
  const size_t n = size();
  std::string out = "[";
  for (size_t i = 0; i < n && i < max_items; ++i) {
    if (i) out += ", ";
    if (elem_type_ == ValueType::STRING) out += quote(strings_[i], 40);
    else if (elem_type_ == ValueType::ARRAY) out += arrays_[i].to_display(max_items);
    else out += scalar(elem_type_, is_float(elem_type_) ? 0 : ints_[i], is_float(elem_type_) ? floats_[i] : 0);
  }
  if (n > max_items) out += fmt::format(", ... ({} {} total)", n, type_name(elem_type_));
  return out + "]";
}

}  // namespace epq::gguf
