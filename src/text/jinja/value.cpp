#include "text/jinja/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <variant>
#include <vector>

#include "text/byte_unicode.h"
#include "text/jinja/budget.h"
#include "text/jinja/error.h"

namespace epq::text::jinja {
namespace {

// Deeper nesting is refused: printing, dumping and comparing recurse.
constexpr int kMaxNesting = 512;

void check_nesting(int depth) {
  if (depth > kMaxNesting) failure("value nested more than {} levels deep", kMaxNesting);
}

// Lists and dicts are freed one at a time. Freeing one frees the values it holds, and a
// template can build a chain of lists a million deep (appending each new list to the last
// one): freed recursively, it would overflow the stack. A list or dict whose last owner
// goes while another is being freed on this thread waits in a queue instead.
using Doomed = std::variant<Array*, Object*>;
thread_local std::vector<Doomed> doomed_queue;
thread_local bool freeing = false;

void free_in_turn(Doomed doomed) {
  doomed_queue.push_back(doomed);
  if (freeing) return;
  freeing = true;
  while (!doomed_queue.empty()) {
    const Doomed next = doomed_queue.back();
    doomed_queue.pop_back();
    std::visit([](auto* p) { delete p; }, next);  // may queue the lists and dicts p held
  }
  freeing = false;
  if (doomed_queue.capacity() > 4096) std::vector<Doomed>().swap(doomed_queue);  // after a long chain
}

// Python's float repr: the shortest digits that round-trip, "1.0", "1e-05", "1e+16", "inf".
std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, d, std::chars_format::scientific);
  std::string_view s(buffer, static_cast<size_t>(result.ptr - buffer));  // "-1.2345e+05"
  std::string out;
  if (s.front() == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::atoi(std::string(s.substr(e + 1)).c_str());
  const int point = exponent + 1;  // digits are 0.DIGITS * 10^point
  const auto n = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    } else if (point >= n) {
      out += digits + std::string(static_cast<size_t>(point - n), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
    }
  } else {
    out += digits[0];
    if (n > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  return out;
}

void append_repr(std::string& out, const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  out += quote;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  out += quote;
}

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u >= 0x80 && ensure_ascii) {
      uint32_t cp = next_code_point(s, i);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", cp);
      }
      continue;
    }
    ++i;
    switch (u) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (u < 0x20) {
          out += fmt::format("\\u{:04x}", u);
        } else {
          out += static_cast<char>(u);
        }
    }
  }
  out += '"';
}

void append_str(std::string& out, const Value& v, bool as_repr, int depth) {
  check_nesting(depth);
  switch (v.kind()) {
    case Value::Kind::Undefined:
      if (as_repr) out += "Undefined";
      return;
    case Value::Kind::None: out += "None"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: out += format_float(v.as_double()); return;
    case Value::Kind::String:
      if (as_repr) {
        append_repr(out, v.str());
      } else {
        out += v.str();
      }
      return;
    case Value::Kind::List: {
      out += '[';
      const Array& items = v.array();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        append_str(out, items[i], true, depth + 1);
        check_bytes(out.size());
      }
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.object().entries()) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, key);
        out += ": ";
        append_str(out, value, true, depth + 1);
        check_bytes(out.size());
      }
      out += '}';
      return;
    }
    case Value::Kind::Callable: out += "<function " + v.function().name + ">"; return;
  }
}

void append_newline(std::string& out, const JsonStyle& style, int level) {
  if (style.indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(style.indent) * static_cast<size_t>(level), ' ');
}

void append_json(std::string& out, const Value& v, const JsonStyle& style, int level) {
  check_nesting(level);
  switch (v.kind()) {
    case Value::Kind::Undefined: failure("Object of type Undefined is not JSON serializable");
    case Value::Kind::Callable: failure("Object of type function is not JSON serializable");
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d < 0 ? "-Infinity" : "Infinity";
      } else {
        out += format_float(d);
      }
      return;
    }
    case Value::Kind::String: append_json_string(out, v.str(), style.ensure_ascii); return;
    case Value::Kind::List: {
      const Array& items = v.array();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += style.item_separator;
        append_newline(out, style, level + 1);
        append_json(out, items[i], style, level + 1);
        check_bytes(out.size());
      }
      append_newline(out, style, level);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : v.object().entries()) entries.push_back(&entry);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (style.sort_keys) std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += style.item_separator;
        append_newline(out, style, level + 1);
        append_json_string(out, entries[i]->first, style.ensure_ascii);
        out += style.key_separator;
        append_json(out, entries[i]->second, style, level + 1);
        check_bytes(out.size());
      }
      append_newline(out, style, level);
      out += '}';
      return;
    }
  }
}

template <typename Json>
Value from_json_at(const Json& json, int depth) {
  check_nesting(depth);
  using T = nlohmann::json::value_t;
  switch (json.type()) {
    case T::null: return nullptr;
    case T::boolean: return json.template get<bool>();
    case T::number_integer: return json.template get<int64_t>();
    case T::number_unsigned: {
      const auto u = json.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(u);
      return static_cast<double>(u);
    }
    case T::number_float: return json.template get<double>();
    case T::string: return json.template get_ref<const std::string&>();
    case T::array: {
      Array items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json_at(item, depth + 1));
      return Value(std::move(items));
    }
    case T::object: {
      Object object;
      for (const auto& [key, item] : json.items()) object.append_unique(key, from_json_at(item, depth + 1));
      return Value(std::move(object));
    }
    default: failure("unsupported JSON value");
  }
}

nlohmann::ordered_json to_json_at(const Value& v, int depth) {
  check_nesting(depth);
  switch (v.kind()) {
    case Value::Kind::None: return nullptr;
    case Value::Kind::Bool: return v.as_bool();
    case Value::Kind::Int: return v.as_int();
    case Value::Kind::Float: return v.as_double();
    case Value::Kind::String: return v.str();
    case Value::Kind::List: {
      auto json = nlohmann::ordered_json::array();
      for (const Value& item : v.array()) json.push_back(to_json_at(item, depth + 1));
      return json;
    }
    case Value::Kind::Dict: {
      auto json = nlohmann::ordered_json::object();
      for (const auto& [key, item] : v.object().entries()) json[key] = to_json_at(item, depth + 1);
      return json;
    }
    default: failure("a value of type '{}' has no JSON form", v.type_name());
  }
}

bool equal_at(const Value& a, const Value& b, int depth) {
  check_nesting(depth);
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::List: {
      const Array &x = a.array(), &y = b.array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equal_at(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::Dict: {
      const Object &x = a.object(), &y = b.object();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.find(key);
        if (other == nullptr || !equal_at(value, *other, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::Callable: return &a.function() == &b.function();
    default: return false;  // numbers were compared above
  }
}

bool less_at(const Value& a, const Value& b, int depth) {
  check_nesting(depth);
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_array() && b.is_array()) {
    const Array &x = a.array(), &y = b.array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal_at(x[i], y[i], depth + 1)) return less_at(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  failure("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name());
}

}  // namespace

bool holds(const Value& v, const Value& container) {
  std::vector<const Value*> pending = {&v};
  while (!pending.empty()) {
    const Value* item = pending.back();
    pending.pop_back();
    WorkBudget::charge(1);
    if (item->is_array()) {
      if (container.is_array() && &item->array() == &container.array()) return true;
      for (const Value& child : item->array()) pending.push_back(&child);
    } else if (item->is_object()) {
      if (container.is_object() && &item->object() == &container.object()) return true;
      for (const auto& entry : item->object().entries()) pending.push_back(&entry.second);
    }
  }
  return false;
}

void check_bytes(size_t bytes) {
  if (bytes > kMaxBytes) failure("string too long: over {} bytes", kMaxBytes);
}

void check_items(size_t items) {
  if (items > kMaxItems) failure("list too long: over {} items", kMaxItems);
}

Value::Value(std::string s) {
  check_bytes(s.size());
  data_ = std::make_shared<const std::string>(std::move(s));
}

Value::Value(Array a) {
  check_items(a.size());
  data_ = ArrayPtr(new Array(std::move(a)), [](Array* doomed) { free_in_turn(doomed); });
}

Value::Value(Object o) : data_(ObjectPtr(new Object(std::move(o)), [](Object* doomed) { free_in_turn(doomed); })) {}

Value::Value(Function f) : data_(std::make_shared<const Function>(std::move(f))) {}

Value Value::from_json(const nlohmann::ordered_json& json) { return from_json_at(json, 0); }

Value Value::from_json(const nlohmann::json& json) { return from_json_at(json, 0); }

nlohmann::ordered_json Value::to_json() const { return to_json_at(*this, 0); }

bool Value::is_number() const {
  const Kind k = kind();
  return k == Kind::Bool || k == Kind::Int || k == Kind::Float;
}

int64_t Value::as_int() const {
  if (kind() == Kind::Bool) return as_bool() ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (kind() == Kind::Float) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_double() != 0.0;
    case Kind::String: return !str().empty();
    case Kind::List: return !array().empty();
    case Kind::Dict: return object().size() > 0;
    case Kind::Callable: return true;
  }
  return false;
}

std::string Value::to_string() const {
  if (is_string()) return str();
  std::string out;
  append_str(out, *this, false, 0);
  WorkBudget::charge_bytes(out.size());
  return out;
}

std::string Value::repr() const {
  std::string out;
  append_str(out, *this, true, 0);
  WorkBudget::charge_bytes(out.size());
  return out;
}

std::string Value::dump(const JsonStyle& style) const {
  std::string out;
  append_json(out, *this, style, 0);
  WorkBudget::charge_bytes(out.size());
  return out;
}

const char* Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return object().is_namespace() ? "Namespace" : "dict";
    case Kind::Callable: return "function";
  }
  return "?";
}

bool Value::operator==(const Value& other) const { return equal_at(*this, other, 0); }

bool Value::less(const Value& other) const { return less_at(*this, other, 0); }

const Value* Object::find(std::string_view key) const {
  for (const auto& entry : entries_) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

void Object::set(std::string key, Value value) {
  for (auto& entry : entries_) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

std::vector<Value> Arguments::bind(std::string_view function, std::initializer_list<std::string_view> params) const {
  if (positional.size() > params.size()) {
    failure("{}() takes at most {} arguments ({} given)", function, params.size(), positional.size());
  }
  std::vector<Value> bound(params.size());
  std::copy(positional.begin(), positional.end(), bound.begin());
  for (const auto& [name, value] : named) {
    const auto* it = std::find(params.begin(), params.end(), name);
    if (it == params.end()) failure("{}() got an unexpected keyword argument '{}'", function, name);
    const auto index = static_cast<size_t>(it - params.begin());
    if (index < positional.size()) failure("{}() got multiple values for argument '{}'", function, name);
    bound[index] = value;
  }
  return bound;
}

}  // namespace epq::text::jinja
