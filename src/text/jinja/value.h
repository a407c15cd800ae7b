#pragma once
// The values a template computes with, following Python where Jinja does: undefined (a
// missing variable, key or attribute: prints as "", iterates as empty, is false), none,
// bool, int (64-bit; overflow is an error, not a bignum), float, string (UTF-8 bytes),
// array (a Python list) and object (an insertion-ordered dict, also what namespace()
// makes), both shared and mutable as in Python and freed without recursion however deep
// they nest, and function (builtins, bound methods, macros). Values convert from and to
// JSON, print like Python's str() and dump like Python's json.dumps.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace epq::text::jinja {

class Value;
class Object;
struct Arguments;
using Array = std::vector<Value>;

struct Function {
  std::string name;
  std::function<Value(const Arguments&)> call;
};

// The longest string (in bytes) and list (in items) a template may build.
inline constexpr size_t kMaxBytes = size_t{64} << 20;
inline constexpr size_t kMaxItems = size_t{1} << 20;
void check_bytes(size_t bytes);  // throw Failure past the limit
void check_items(size_t items);

// json.dumps' options, as the tojson filter takes them.
struct JsonStyle {
  int indent = -1;  // negative: all on one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Callable };

  Value() = default;  // undefined
  Value(std::nullptr_t) : data_(nullptr) {}
  Value(bool b) : data_(b) {}
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Value(T i) : data_(static_cast<int64_t>(i)) {}
  Value(double d) : data_(d) {}
  Value(std::string s);  // throws Failure past kMaxBytes
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(Array a);  // throws Failure past kMaxItems
  Value(Object o);
  Value(Function f);

  // JSON objects become objects, integers that fit in int64 ints. Key order is kept
  // from ordered_json (as Python keeps it: tojson prints keys in that order); plain json
  // has sorted its keys already. Throws Failure past 512 levels of nesting.
  static Value from_json(const nlohmann::ordered_json& json);
  static Value from_json(const nlohmann::json& json);
  nlohmann::ordered_json to_json() const;  // throws Failure for undefined and functions

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_string() const { return kind() == Kind::String; }
  bool is_array() const { return kind() == Kind::List; }
  bool is_object() const { return kind() == Kind::Dict; }
  bool is_function() const { return kind() == Kind::Callable; }
  bool is_integer() const { return kind() == Kind::Int; }
  bool is_number() const;  // bool, int or float: bool is a number in Python

  // Accessors for a value known to be of that kind. Arrays and objects are shared: a
  // change made through one copy of the value shows through all of them.
  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;  // int or bool
  double as_double() const;  // any number
  const std::string& str() const { return *std::get<StringPtr>(data_); }
  Array& array() const { return *std::get<ArrayPtr>(data_); }
  Object& object() const { return *std::get<ObjectPtr>(data_); }
  const Function& function() const { return *std::get<FunctionPtr>(data_); }

  bool truthy() const;
  std::string to_string() const;  // Python's str(): what {{ value }} prints
  std::string repr() const;       // Python's repr(): how items print inside lists and dicts
  std::string dump(const JsonStyle& style) const;  // json.dumps; throws Failure if not JSON
  const char* type_name() const;  // Python's name for the type, for error messages

  bool operator==(const Value& other) const;  // Python's ==: 1 == 1.0 == True
  // Python's <: numbers, strings (by code point), arrays lexicographically; Failure otherwise.
  bool less(const Value& other) const;

 private:
  using StringPtr = std::shared_ptr<const std::string>;
  using ArrayPtr = std::shared_ptr<Array>;
  using ObjectPtr = std::shared_ptr<Object>;
  using FunctionPtr = std::shared_ptr<const Function>;
  std::variant<std::monostate, std::nullptr_t, bool, int64_t, double, StringPtr, ArrayPtr, ObjectPtr, FunctionPtr> data_;
};

// A string-keyed dict that keeps insertion order. Lookups scan: template dicts and the
// objects of a request are small.
class Object {
 public:
  using Entries = std::vector<std::pair<std::string, Value>>;

  explicit Object(bool is_namespace = false) : namespace_(is_namespace) {}

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces an existing key's value in place
  // For a key known to be new (building from JSON): no scan.
  void append_unique(std::string key, Value value) { entries_.emplace_back(std::move(key), std::move(value)); }
  const Entries& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  // namespace() objects: the only ones "{% set ns.attr = ... %}" may change, and whose
  // attributes are their keys only (no dict methods).
  bool is_namespace() const { return namespace_; }

 private:
  Entries entries_;
  bool namespace_;
};

// Whether v is, or holds at any depth, the very list or dict `container`: storing v in
// it would make a cycle, which shared ownership never frees. Charges its walk as work.
bool holds(const Value& v, const Value& container);

// The arguments of a call: f(positional..., name=value...).
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;

  // Binds the arguments to the parameters, Python-style: by position, then by name.
  // Parameters not given are undefined. Throws Failure for extra or unknown arguments.
  std::vector<Value> bind(std::string_view function, std::initializer_list<std::string_view> params) const;
};

}  // namespace epq::text::jinja
