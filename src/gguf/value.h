#pragma once
// A GGUF metadata value: one of the 13 value types, arrays (possibly nested) included.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace epq::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* type_name(ValueType type);
bool is_integer(ValueType type);
bool is_float(ValueType type);

class Value {
 public:
  Value() = default;
  static Value integer(ValueType type, int64_t v);  // any integer type or BOOL
  static Value u64(uint64_t v);
  static Value floating(ValueType type, double v);  // FLOAT32 or FLOAT64
  static Value string(std::string v);
  static Value array(ValueType elem_type, std::vector<Value> elems);
  // Typed arrays without per-element Values, for large vocabularies.
  static Value string_array(std::vector<std::string> v);
  static Value int_array(ValueType elem_type, std::vector<int64_t> v);
  static Value float_array(ValueType elem_type, std::vector<double> v);

  ValueType type() const { return type_; }
  int64_t as_int() const { return int_; }  // integers and BOOL; UINT64 as its bit pattern
  uint64_t as_uint() const { return static_cast<uint64_t>(int_); }
  double as_float() const { return float_; }
  const std::string& as_string() const { return string_; }

  // Arrays. Exactly one of the element stores is used, chosen by the element type.
  ValueType elem_type() const { return elem_type_; }
  size_t size() const;
  const std::vector<std::string>& strings() const { return strings_; }
  const std::vector<int64_t>& ints() const { return ints_; }
  const std::vector<double>& floats() const { return floats_; }
  const std::vector<Value>& arrays() const { return arrays_; }

  // Human-readable rendering; arrays longer than max_items are summarized.
  std::string to_display(size_t max_items = 8) const;

 private:
  ValueType type_ = ValueType::UINT8;
  int64_t int_ = 0;
  double float_ = 0;
  std::string string_;
  ValueType elem_type_ = ValueType::UINT8;
  std::vector<std::string> strings_;
  std::vector<int64_t> ints_;
  std::vector<double> floats_;
  std::vector<Value> arrays_;
};

}  // namespace epq::gguf
