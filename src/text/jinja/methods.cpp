#include "text/jinja/methods.h"

#include <algorithm>
#include <charconv>
#include <unordered_map>

#include "text/jinja/error.h"
#include "text/jinja/operations.h"
#include "text/jinja/strings.h"

namespace epq::text::jinja {
namespace {

using Method = Value (*)(const Value& self, const Arguments& args);
using MethodTable = std::unordered_map<std::string_view, Method>;

std::optional<std::string> optional_string(const Value& v) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) failure("expected a string, got '{}'", v.type_name());
  return v.str();
}

const std::string& string_argument(const Value& v) {
  if (!v.is_string()) failure("expected a string, got '{}'", v.type_name());
  return v.str();
}

int64_t optional_int(const Value& v, int64_t fallback) {
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_integer()) failure("expected an integer, got '{}'", v.type_name());
  return v.as_int();
}

Value strip_method(const Value& self, const Arguments& args, Side side) {
  return strip(self.str(), side, optional_string(args.bind("strip", {"chars"})[0]));
}

// "prefix" or ("prefix", "other")
bool matches_any(const Value& candidates, const std::string& s, bool at_start) {
  auto matches = [&](const Value& c) {
    const std::string& p = string_argument(c);
    if (p.size() > s.size()) return false;
    return at_start ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (candidates.is_array()) return std::any_of(candidates.array().begin(), candidates.array().end(), matches);
  return matches(candidates);
}

Value format(const std::string& s, const Arguments& args) {
  std::string out;
  size_t next_index = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if ((c == '{' || c == '}') && i + 1 < s.size() && s[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') failure("single '}}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = s.find('}', i);
    if (close == std::string::npos) failure("single '{{' encountered in format string");
    const std::string field = s.substr(i + 1, close - i - 1);
    i = close;
    if (field.find_first_of(":!.[") != std::string::npos) failure("format field '{}' is not supported", field);
    const Value* value = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t index = next_index;
      if (field.empty()) {
        ++next_index;
      } else if (std::from_chars(field.data(), field.data() + field.size(), index).ec != std::errc()) {
        failure("format index {} out of range", field);
      }
      if (index >= args.positional.size()) failure("format index {} out of range", index);
      value = &args.positional[index];
    } else {
      for (const auto& [name, v] : args.named) {
        if (name == field) value = &v;
      }
      if (value == nullptr) failure("format field '{}' not given", field);
    }
    out += value->to_string();
  }
  return out;
}

const MethodTable& string_methods() {
  static const MethodTable table = {
      {"strip", [](const Value& self, const Arguments& args) { return strip_method(self, args, Side::Both); }},
      {"lstrip", [](const Value& self, const Arguments& args) { return strip_method(self, args, Side::Left); }},
      {"rstrip", [](const Value& self, const Arguments& args) { return strip_method(self, args, Side::Right); }},
      {"split",
       [](const Value& self, const Arguments& args) {
         const auto a = args.bind("split", {"sep", "maxsplit"});
         Array pieces;
         for (std::string& piece : split(self.str(), optional_string(a[0]), optional_int(a[1], -1))) pieces.emplace_back(std::move(piece));
         return Value(std::move(pieces));
       }},
      {"startswith",
       [](const Value& self, const Arguments& args) { return Value(matches_any(args.bind("startswith", {"prefix"})[0], self.str(), true)); }},
      {"endswith",
       [](const Value& self, const Arguments& args) { return Value(matches_any(args.bind("endswith", {"suffix"})[0], self.str(), false)); }},
      {"upper",
       [](const Value& self, const Arguments& args) {
         args.bind("upper", {});
         return Value(to_upper(self.str()));
       }},
      {"lower",
       [](const Value& self, const Arguments& args) {
         args.bind("lower", {});
         return Value(to_lower(self.str()));
       }},
      {"title",
       [](const Value& self, const Arguments& args) {
         args.bind("title", {});
         return Value(title(self.str()));
       }},
      {"capitalize",
       [](const Value& self, const Arguments& args) {
         args.bind("capitalize", {});
         return Value(capitalize(self.str()));
       }},
      {"replace",
       [](const Value& self, const Arguments& args) {
         const auto a = args.bind("replace", {"old", "new", "count"});
         return Value(replace(self.str(), string_argument(a[0]), string_argument(a[1]), optional_int(a[2], -1)));
       }},
      {"find", [](const Value& self, const Arguments& args) { return Value(find(self.str(), string_argument(args.bind("find", {"sub"})[0]))); }},
      {"count",
       [](const Value& self, const Arguments& args) {
         const std::string& sub = string_argument(args.bind("count", {"sub"})[0]);
         if (sub.empty()) return Value(count_code_points(self.str()) + 1);
         int64_t n = 0;
         for (size_t at = self.str().find(sub); at != std::string::npos; at = self.str().find(sub, at + sub.size())) ++n;
         return Value(n);
       }},
      {"join",
       [](const Value& self, const Arguments& args) {
         std::string out;
         bool first = true;
         for (const Value& item : iterate(args.bind("join", {"iterable"})[0])) {
           if (!first) out += self.str();
           first = false;
           out += item.to_string();
           check_bytes(out.size());
         }
         return Value(std::move(out));
       }},
      {"format", [](const Value& self, const Arguments& args) { return format(self.str(), args); }},
  };
  return table;
}

const MethodTable& dict_methods() {
  static const MethodTable table = {
      {"get",
       [](const Value& self, const Arguments& args) {
         const auto a = args.bind("get", {"key", "default"});
         if (a[0].is_string()) {
           if (const Value* v = self.object().find(a[0].str())) return *v;
         }
         return a[1].is_undefined() ? Value(nullptr) : a[1];
       }},
      {"items",
       [](const Value& self, const Arguments& args) {
         args.bind("items", {});
         Array pairs;
         for (const auto& [key, value] : self.object().entries()) pairs.emplace_back(Array{key, value});
         return Value(std::move(pairs));
       }},
      {"keys",
       [](const Value& self, const Arguments& args) {
         args.bind("keys", {});
         return Value(iterate(self));
       }},
      {"values",
       [](const Value& self, const Arguments& args) {
         args.bind("values", {});
         Array values;
         for (const auto& entry : self.object().entries()) values.push_back(entry.second);
         return Value(std::move(values));
       }},
  };
  return table;
}

const MethodTable& list_methods() {
  static const MethodTable table = {
      {"append",
       [](const Value& self, const Arguments& args) {
         const Value item = args.bind("append", {"item"})[0];
         check_items(self.array().size() + 1);
         if (holds(item, self)) failure("cannot append a list to itself");
         self.array().push_back(item);
         return Value(nullptr);
       }},
  };
  return table;
}

}  // namespace

std::optional<Value> find_method(const Value& self, std::string_view name) {
  const MethodTable* table = nullptr;
  if (self.is_string()) {
    table = &string_methods();
  } else if (self.is_object()) {
    table = &dict_methods();
  } else if (self.is_array()) {
    table = &list_methods();
  } else {
    return std::nullopt;
  }
  const auto it = table->find(name);
  if (it == table->end()) return std::nullopt;
  const Method method = it->second;
  return Value(Function{std::string(name), [self, method](const Arguments& args) { return method(self, args); }});
}

}  // namespace epq::text::jinja
