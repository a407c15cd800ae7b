#include "text/jinja/operations.h"

#include <cmath>
#include <limits>
#include <optional>

#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/methods.h"
#include "text/jinja/strings.h"

namespace epq::text::jinja {
namespace {

[[noreturn]] void unsupported(const char* symbol, const Value& a, const Value& b) {
  failure("unsupported operand type(s) for {}: '{}' and '{}'", symbol, a.type_name(), b.type_name());
}

bool both_integers(const Value& a, const Value& b) {
  return a.is_number() && b.is_number() && a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float;
}

bool both_numbers(const Value& a, const Value& b) { return a.is_number() && b.is_number(); }

int64_t add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) failure("integer overflow");
  return r;
}

int64_t subtract(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) failure("integer overflow");
  return r;
}

int64_t multiply(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) failure("integer overflow");
  return r;
}

bool is_sequence(const Value& v) { return v.is_string() || v.is_array(); }
bool is_count(const Value& v) { return v.is_number() && v.kind() != Value::Kind::Float; }

// "ab" * 3, [1] * 3
Value repeat(const Value& sequence, const Value& count) {
  const auto n = static_cast<size_t>(std::max<int64_t>(0, count.as_int()));
  const size_t size = sequence.is_string() ? sequence.str().size() : sequence.array().size();
  const size_t total = n > 0 && size > std::numeric_limits<size_t>::max() / n ? std::numeric_limits<size_t>::max() : size * n;
  if (sequence.is_string()) {
    check_bytes(total);
    WorkBudget::charge_bytes(total);
  } else {
    check_items(total);
    WorkBudget::charge(total);
  }
  if (sequence.is_string()) {
    std::string out;
    out.reserve(size * n);
    for (size_t i = 0; i < n; ++i) out += sequence.str();
    return out;
  }
  Array out;
  out.reserve(size * n);
  for (size_t i = 0; i < n; ++i) out.insert(out.end(), sequence.array().begin(), sequence.array().end());
  return out;
}

Value power(const Value& a, const Value& b) {
  if (both_integers(a, b) && b.as_int() >= 0) {
    int64_t base = a.as_int(), exponent = b.as_int(), result = 1;
    while (exponent > 0) {
      if (exponent & 1) result = multiply(result, base);
      exponent >>= 1;
      if (exponent > 0) base = multiply(base, base);
    }
    return result;
  }
  if (a.as_double() == 0.0 && b.as_double() < 0) failure("0.0 cannot be raised to a negative power");
  return std::pow(a.as_double(), b.as_double());
}

Value floor_divide(const Value& a, const Value& b) {
  if (b.as_double() == 0.0) failure("integer division or modulo by zero");
  if (!both_integers(a, b)) return std::floor(a.as_double() / b.as_double());
  const int64_t x = a.as_int(), y = b.as_int();
  if (x == std::numeric_limits<int64_t>::min() && y == -1) failure("integer overflow");
  int64_t q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) --q;
  return q;
}

Value modulo(const Value& a, const Value& b) {
  if (b.as_double() == 0.0) failure("integer division or modulo by zero");
  if (!both_integers(a, b)) {
    const double y = b.as_double();
    double r = std::fmod(a.as_double(), y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return r;
  }
  const int64_t x = a.as_int(), y = b.as_int();
  if (y == -1) return int64_t{0};
  int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}

std::optional<int64_t> slice_bound(const Value& v) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!is_count(v)) failure("slice indices must be integers or None");
  return v.as_int();
}

// Python's slice.indices(): the positions start, start+step, ... before stop.
std::vector<size_t> slice_positions(int64_t n, const Value& start_value, const Value& stop_value, const Value& step_value) {
  const int64_t step = slice_bound(step_value).value_or(1);
  if (step == 0) failure("slice step cannot be zero");
  auto adjust = [&](std::optional<int64_t> bound, int64_t fallback) {
    if (!bound) return fallback;
    int64_t i = *bound;
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t start = adjust(slice_bound(start_value), step < 0 ? n - 1 : 0);
  const int64_t stop = adjust(slice_bound(stop_value), step < 0 ? -1 : n);
  std::vector<size_t> positions;
  WorkBudget::charge(static_cast<uint64_t>(n));
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) positions.push_back(static_cast<size_t>(i));
  return positions;
}

}  // namespace

Value binary(BinaryOp op, const Value& a, const Value& b) {
  switch (op) {
    case BinaryOp::Concat: {
      std::string joined = a.to_string() + b.to_string();
      WorkBudget::charge_bytes(joined.size());
      return joined;
    }
    case BinaryOp::Add:
      if (both_integers(a, b)) return add(a.as_int(), b.as_int());
      if (both_numbers(a, b)) return a.as_double() + b.as_double();
      if (a.is_string() && b.is_string()) {
        WorkBudget::charge_bytes(a.str().size() + b.str().size());
        return a.str() + b.str();
      }
      if (a.is_array() && b.is_array()) {
        check_items(a.array().size() + b.array().size());
        WorkBudget::charge(a.array().size() + b.array().size());
        Array out = a.array();
        out.insert(out.end(), b.array().begin(), b.array().end());
        return out;
      }
      unsupported("+", a, b);
    case BinaryOp::Subtract:
      if (both_integers(a, b)) return subtract(a.as_int(), b.as_int());
      if (both_numbers(a, b)) return a.as_double() - b.as_double();
      unsupported("-", a, b);
    case BinaryOp::Multiply:
      if (both_integers(a, b)) return multiply(a.as_int(), b.as_int());
      if (both_numbers(a, b)) return a.as_double() * b.as_double();
      if (is_sequence(a) && is_count(b)) return repeat(a, b);
      if (is_count(a) && is_sequence(b)) return repeat(b, a);
      unsupported("*", a, b);
    case BinaryOp::Divide:
      if (!both_numbers(a, b)) unsupported("/", a, b);
      if (b.as_double() == 0.0) failure("division by zero");
      return a.as_double() / b.as_double();
    case BinaryOp::FloorDivide:
      if (!both_numbers(a, b)) unsupported("//", a, b);
      return floor_divide(a, b);
    case BinaryOp::Modulo:
      if (!both_numbers(a, b)) unsupported("%", a, b);
      return modulo(a, b);
    case BinaryOp::Power:
      if (!both_numbers(a, b)) unsupported("**", a, b);
      return power(a, b);
  }
  unsupported("?", a, b);
}

Value negate(const Value& v) {
  if (v.kind() == Value::Kind::Float) return -v.as_double();
  if (!v.is_number()) failure("bad operand type for unary -: '{}'", v.type_name());
  if (v.as_int() == std::numeric_limits<int64_t>::min()) failure("integer overflow");
  return -v.as_int();
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::String:
      if (!item.is_string()) failure("'in <string>' requires string as left operand, not {}", item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
      WorkBudget::charge(container.array().size());
      for (const Value& v : container.array()) {
        if (v == item) return true;
      }
      return false;
    case Value::Kind::Dict: return item.is_string() && container.object().find(item.str()) != nullptr;
    case Value::Kind::Undefined: return false;
    default: failure("argument of type '{}' is not iterable", container.type_name());
  }
}

Value get_attribute(const Value& object, std::string_view name) {
  if (object.is_object()) {
    const Object& o = object.object();
    if (!o.is_namespace()) {
      if (std::optional<Value> method = find_method(object, name)) return *method;
    }
    if (const Value* v = o.find(name)) return *v;
    return {};
  }
  if (std::optional<Value> method = find_method(object, name)) return *method;
  return {};
}

Value get_item(const Value& object, const Value& key) {
  if (key.is_integer()) {
    if (object.is_array() || object.is_string()) {
      const int64_t n = length(object);
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return {};
      if (object.is_array()) return object.array()[static_cast<size_t>(i)];
      return code_points(object.str())[static_cast<size_t>(i)];
    }
    return {};
  }
  if (!key.is_string()) return {};
  if (object.is_object()) {
    if (const Value* v = object.object().find(key.str())) return *v;
    if (object.object().is_namespace()) return {};
  }
  if (std::optional<Value> method = find_method(object, key.str())) return *method;
  return {};
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is_array()) {
    const Array& items = object.array();
    Array out;
    for (size_t i : slice_positions(static_cast<int64_t>(items.size()), start, stop, step)) out.push_back(items[i]);
    return out;
  }
  if (object.is_string()) {
    const std::vector<std::string_view> points = code_points(object.str());
    std::string out;
    for (size_t i : slice_positions(static_cast<int64_t>(points.size()), start, stop, step)) out += points[i];
    return out;
  }
  if (object.is_undefined()) return {};
  failure("'{}' object is not subscriptable", object.type_name());
}

Array iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::List:
      WorkBudget::charge(v.array().size());
      return v.array();
    case Value::Kind::Dict: {
      WorkBudget::charge(v.object().size());
      Array keys;
      for (const auto& entry : v.object().entries()) keys.emplace_back(entry.first);
      return keys;
    }
    case Value::Kind::String: {
      Array characters;
      for (std::string_view p : code_points(v.str())) characters.emplace_back(p);
      return characters;
    }
    case Value::Kind::Undefined: return {};
    default: failure("'{}' object is not iterable", v.type_name());
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::String: return count_code_points(v.str());
    case Value::Kind::List: return static_cast<int64_t>(v.array().size());
    case Value::Kind::Dict: return static_cast<int64_t>(v.object().size());
    case Value::Kind::Undefined: return 0;
    default: failure("object of type '{}' has no len()", v.type_name());
  }
}

}  // namespace epq::text::jinja
