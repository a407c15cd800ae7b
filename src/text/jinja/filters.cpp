#include "text/jinja/filters.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/operations.h"
#include "text/jinja/strings.h"

namespace epq::text::jinja {
namespace {

bool given(const Value& v) { return !v.is_undefined(); }

void no_arguments(const Arguments& args, std::string_view name) { args.bind(name, {}); }

std::optional<int64_t> parse_integer(const std::string& s) {
  int64_t value = 0;
  const auto result = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || result.ec != std::errc() || result.ptr != s.data() + s.size()) return std::nullopt;
  return value;
}

bool flag(const Value& v, bool fallback) { return given(v) ? v.truthy() : fallback; }

int64_t integer(const Value& v, int64_t fallback, std::string_view what) {
  if (!given(v)) return fallback;
  if (!v.is_number() || v.kind() == Value::Kind::Float) failure("{} must be an integer, got '{}'", what, v.type_name());
  return v.as_int();
}

// Jinja's attribute= argument: "name", "a.b" or "items.0", looked up item by item.
Value lookup_path(const Value& item, const Value& path) {
  if (!given(path) || path.is_none()) return item;
  if (path.is_integer()) return get_item(item, path);
  Value v = item;
  for (const std::string& part : split(path.to_string(), std::string("."), -1)) {
    const std::optional<int64_t> index = part[0] != '-' && part[0] != '+' ? parse_integer(part) : std::nullopt;
    v = index ? get_item(v, *index) : get_item(v, part);
  }
  return v;
}

// The sort/unique/min/max key: the item or its attribute, lowercased unless case matters.
Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  Value key = lookup_path(item, attribute);
  if (!case_sensitive && key.is_string()) return to_lower(key.str());
  return key;
}

// Python's sorted(): stable, and reverse keeps equal items in their order.
void sort_by_key(Array& items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return reverse ? keys[b].less(keys[a]) : keys[a].less(keys[b]); });
  Array sorted;
  sorted.reserve(items.size());
  for (size_t i : order) sorted.push_back(items[i]);
  items = std::move(sorted);
}

Arguments tail(const Arguments& args, size_t skip) {
  Arguments rest;
  if (args.positional.size() > skip) rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(skip), args.positional.end());
  rest.named = args.named;
  return rest;
}

// select/reject/selectattr/rejectattr: items whose (attribute's) test result is wanted.
// The test's name is the first remaining argument, and the rest are its arguments; with
// no test, an item passes if it is true.
Value select(const Value& input, const Arguments& args, bool wanted, bool by_attribute) {
  const Value attribute = by_attribute ? (args.positional.empty() ? Value() : args.positional[0]) : Value();
  if (by_attribute && !given(attribute)) failure("selectattr/rejectattr need an attribute");
  const size_t test_at = by_attribute ? 1 : 0;
  Test test = nullptr;
  if (args.positional.size() > test_at) {
    const Value& name = args.positional[test_at];
    test = find_test(name.to_string());
    if (test == nullptr) failure("unknown test '{}'", name.to_string());
  }
  const Arguments test_args = tail(args, test_at + 1);
  Array out;
  for (const Value& item : iterate(input)) {
    const Value subject = by_attribute ? lookup_path(item, attribute) : item;
    const bool passed = test != nullptr ? test(subject, test_args) : subject.truthy();
    if (passed == wanted) out.push_back(item);
  }
  return out;
}

Value map_filter(const Value& input, const Arguments& args) {
  Array out;
  if (args.positional.empty()) {
    const auto a = args.bind("map", {"attribute", "default"});
    for (const Value& item : iterate(input)) {
      Value v = lookup_path(item, a[0]);
      out.push_back(v.is_undefined() && given(a[1]) ? a[1] : v);
    }
    return out;
  }
  const std::string name = args.positional[0].to_string();
  const Filter filter = find_filter(name);
  if (filter == nullptr) failure("unknown filter '{}'", name);
  const Arguments rest = tail(args, 1);
  for (const Value& item : iterate(input)) out.push_back(filter(item, rest));
  return out;
}

Value min_or_max(const Value& input, const Arguments& args, bool want_max) {
  const auto a = args.bind(want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const Array items = iterate(input);
  if (items.empty()) return {};
  const bool case_sensitive = flag(a[0], false);
  size_t best = 0;
  Value best_key = sort_key(items[0], a[1], case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(items[i], a[1], case_sensitive);
    if (want_max ? best_key.less(key) : key.less(best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value sort_filter(const Value& input, const Arguments& args) {
  const auto a = args.bind("sort", {"reverse", "case_sensitive", "attribute"});
  Array items = iterate(input);
  std::vector<Value> keys;
  for (const Value& item : items) keys.push_back(sort_key(item, a[2], flag(a[1], false)));
  sort_by_key(items, keys, flag(a[0], false));
  return items;
}

Value dictsort(const Value& input, const Arguments& args) {
  const auto a = args.bind("dictsort", {"case_sensitive", "by", "reverse"});
  if (!input.is_object()) failure("dictsort expects a mapping, got '{}'", input.type_name());
  const std::string by = given(a[1]) ? a[1].to_string() : "key";
  if (by != "key" && by != "value") failure("You can only sort by either \"key\" or \"value\"");
  Array pairs;
  std::vector<Value> keys;
  for (const auto& [key, value] : input.object().entries()) {
    pairs.emplace_back(Array{key, value});
    keys.push_back(sort_key(by == "key" ? Value(key) : value, Value(), flag(a[0], false)));
  }
  sort_by_key(pairs, keys, flag(a[2], false));
  return pairs;
}

Value unique(const Value& input, const Arguments& args) {
  const auto a = args.bind("unique", {"case_sensitive", "attribute"});
  Array out, seen;
  for (const Value& item : iterate(input)) {
    Value key = sort_key(item, a[1], flag(a[0], false));
    WorkBudget::charge(seen.size());
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return out;
}

Value join(const Value& input, const Arguments& args) {
  const auto a = args.bind("join", {"d", "attribute"});
  const std::string separator = given(a[0]) ? a[0].to_string() : "";
  std::string out;
  bool first = true;
  for (const Value& item : iterate(input)) {
    if (!first) out += separator;
    first = false;
    out += lookup_path(item, a[1]).to_string();
    check_bytes(out.size());
  }
  return out;
}

Value sum(const Value& input, const Arguments& args) {
  const auto a = args.bind("sum", {"attribute", "start"});
  Value total = given(a[1]) ? a[1] : Value(0);
  for (const Value& item : iterate(input)) {
    const Value term = lookup_path(item, a[0]);
    if (!total.is_number() || !term.is_number()) failure("sum() adds numbers only, got '{}'", term.type_name());
    total = binary(BinaryOp::Add, total, term);
  }
  return total;
}

Value batch(const Value& input, const Arguments& args) {
  const auto a = args.bind("batch", {"linecount", "fill_with"});
  const int64_t size = integer(a[0], 0, "batch size");
  if (size < 1) failure("batch size must be at least 1");
  Array out, row;
  for (const Value& item : iterate(input)) {
    if (static_cast<int64_t>(row.size()) == size) out.push_back(std::exchange(row, {}));
    row.push_back(item);
  }
  if (!row.empty()) {
    if (given(a[1]) && !a[1].is_none()) {
      check_items(static_cast<size_t>(size));
      row.resize(static_cast<size_t>(size), a[1]);
    }
    out.push_back(std::move(row));
  }
  return out;
}

Value tojson(const Value& input, const Arguments& args) {
  const auto a = args.bind("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle style;
  style.ensure_ascii = flag(a[0], false);
  if (given(a[1]) && !a[1].is_none()) {
    style.indent = static_cast<int>(std::clamp<int64_t>(integer(a[1], 0, "indent"), 0, 64));
    style.item_separator = ",";
  }
  if (given(a[2]) && !a[2].is_none()) {
    if (!a[2].is_array() || a[2].array().size() != 2) failure("separators must be an (item, key) pair");
    style.item_separator = a[2].array()[0].to_string();
    style.key_separator = a[2].array()[1].to_string();
  }
  style.sort_keys = flag(a[3], false);
  return input.dump(style);
}

// Jinja's indent: every line but the first (unless first=True) gets the indentation;
// blank lines only with blank=True.
Value indent(const Value& input, const Arguments& args) {
  const auto a = args.bind("indent", {"width", "first", "blank"});
  std::string indentation;
  if (a[0].is_string()) {
    indentation = a[0].str();
  } else {
    indentation.assign(static_cast<size_t>(std::clamp<int64_t>(integer(a[0], 4, "width"), 0, 1024)), ' ');
  }
  const bool blank = flag(a[2], false);
  std::vector<std::string> lines = split(input.to_string(), std::string("\n"), -1);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (blank || !lines[i].empty()) out += indentation;
    }
    out += lines[i];
    check_bytes(out.size());
  }
  if (flag(a[1], false)) out = indentation + out;
  return out;
}

Value truncate(const Value& input, const Arguments& args) {
  const auto a = args.bind("truncate", {"length", "killwords", "end", "leeway"});
  const std::string s = input.to_string();
  const int64_t length = integer(a[0], 255, "length");
  const std::string end = given(a[2]) ? a[2].to_string() : "...";
  const int64_t leeway = integer(a[3], 5, "leeway");
  const int64_t end_length = count_code_points(end);
  if (length < end_length) failure("expected length >= {}, got {}", end_length, length);
  if (leeway < 0) failure("expected leeway >= 0, got {}", leeway);
  if (count_code_points(s) <= length + leeway) return s;
  std::string kept = slice(s, Value(), Value(length - end_length), Value()).str();
  if (!flag(a[1], false)) {
    const size_t space = kept.rfind(' ');
    if (space != std::string::npos) kept.resize(space);
  }
  return kept + end;
}

Value center(const Value& input, const Arguments& args) {
  const std::string s = input.to_string();
  const int64_t width = integer(args.bind("center", {"width"})[0], 80, "width");
  const int64_t n = count_code_points(s);
  if (width <= n) return s;
  check_bytes(static_cast<size_t>(width));
  const int64_t margin = width - n;
  const int64_t left = margin / 2 + (margin & width & 1);  // as Python's str.center
  return std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(margin - left), ' ');
}

Value round_filter(const Value& input, const Arguments& args) {
  const auto a = args.bind("round", {"precision", "method"});
  if (!input.is_number()) failure("round expects a number, got '{}'", input.type_name());
  const int64_t precision = std::clamp<int64_t>(integer(a[0], 0, "precision"), -300, 300);
  const std::string method = given(a[1]) ? a[1].to_string() : "common";
  if (method != "common" && method != "ceil" && method != "floor") failure("method must be common, ceil or floor");
  if (method == "common" && input.kind() != Value::Kind::Float && precision >= 0) return input.as_int();
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = input.as_double() * scale;
  const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return r / scale;
}

std::optional<double> parse_float(const std::string& text) {
  const std::string s = strip(text, Side::Both);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

Value int_filter(const Value& input, const Arguments& args) {
  const auto a = args.bind("int", {"default", "base"});
  const Value fallback = given(a[0]) ? a[0] : Value(0);
  if (input.is_number()) {
    if (input.kind() != Value::Kind::Float) return input.as_int();
    const double d = std::trunc(input.as_double());
    if (!(std::fabs(d) < 9.2e18)) return fallback;
    return static_cast<int64_t>(d);
  }
  if (!input.is_string()) return fallback;
  const std::string s = strip(input.str(), Side::Both);
  const auto base = static_cast<int>(integer(a[1], 10, "base"));
  if (base < 2 || base > 36) failure("int() base must be >= 2 and <= 36");
  int64_t value = 0;
  const char* begin = s.c_str() + (s.size() > 1 && s[0] == '+' ? 1 : 0);
  const auto result = std::from_chars(begin, s.c_str() + s.size(), value, base);
  if (result.ec == std::errc() && result.ptr == s.c_str() + s.size() && !s.empty()) return value;
  const std::optional<double> d = parse_float(s);
  if (d && std::fabs(*d) < 9.2e18) return static_cast<int64_t>(std::trunc(*d));
  return fallback;
}

Value float_filter(const Value& input, const Arguments& args) {
  const Value fallback_argument = args.bind("float", {"default"})[0];
  const Value fallback = given(fallback_argument) ? fallback_argument : Value(0.0);
  if (input.is_number()) return input.as_double();
  if (!input.is_string()) return fallback;
  const std::optional<double> d = parse_float(input.str());
  return d ? Value(*d) : fallback;
}

Value abs_filter(const Value& input, const Arguments& args) {
  no_arguments(args, "abs");
  if (input.kind() == Value::Kind::Float) return std::fabs(input.as_double());
  if (!input.is_number()) failure("bad operand type for abs(): '{}'", input.type_name());
  return input.as_int() < 0 ? negate(input) : Value(input.as_int());
}

Value escape(const Value& input, const Arguments& args) {
  no_arguments(args, "escape");
  std::string out;
  for (char c : input.to_string()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Jinja's title filter: words start after whitespace, "-", "(", "{", "[" or "<".
Value title_filter(const Value& input, const Arguments& args) {
  no_arguments(args, "title");
  std::string s = input.to_string();
  bool word_start = true;
  for (char& c : s) {
    const bool separator = is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (!separator) c = word_start ? to_upper(std::string(1, c))[0] : to_lower(std::string(1, c))[0];
    word_start = separator;
  }
  return s;
}

Value wordcount(const Value& input, const Arguments& args) {
  no_arguments(args, "wordcount");
  int64_t words = 0;
  bool in_word = false;
  for (char c : input.to_string()) {
    const auto u = static_cast<unsigned char>(c);
    const bool word = u >= 0x80 || u == '_' || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
    if (word && !in_word) ++words;
    in_word = word;
  }
  return words;
}

Value default_filter(const Value& input, const Arguments& args) {
  const auto a = args.bind("default", {"default_value", "boolean"});
  if (input.is_undefined() || (flag(a[1], false) && !input.truthy())) return given(a[0]) ? a[0] : Value("");
  return input;
}

Value length_filter(const Value& input, const Arguments& args) {
  no_arguments(args, "length");
  return length(input);
}

Value first_or_last(const Value& input, const Arguments& args, bool last) {
  no_arguments(args, last ? "last" : "first");
  const Array items = iterate(input);
  if (items.empty()) return {};
  return last ? items.back() : items.front();
}

Value reverse(const Value& input, const Arguments& args) {
  no_arguments(args, "reverse");
  if (input.is_string()) return slice(input, Value(), Value(), Value(-1));
  Array items = iterate(input);
  std::reverse(items.begin(), items.end());
  return items;
}

Value items(const Value& input, const Arguments& args) {
  no_arguments(args, "items");
  if (input.is_undefined()) return Array{};
  if (!input.is_object()) failure("Can only get item pairs from a mapping.");
  Array pairs;
  for (const auto& [key, value] : input.object().entries()) pairs.emplace_back(Array{key, value});
  return pairs;
}

Value replace_filter(const Value& input, const Arguments& args) {
  const auto a = args.bind("replace", {"old", "new", "count"});
  return replace(input.to_string(), a[0].to_string(), a[1].to_string(), given(a[2]) && !a[2].is_none() ? integer(a[2], -1, "count") : -1);
}

Value trim(const Value& input, const Arguments& args) {
  const Value chars = args.bind("trim", {"chars"})[0];
  return strip(input.to_string(), Side::Both, given(chars) && !chars.is_none() ? std::optional(chars.to_string()) : std::nullopt);
}

template <auto Convert>
Value case_filter(const Value& input, const Arguments& args) {
  no_arguments(args, "case conversion");
  return Convert(input.to_string());
}

const std::unordered_map<std::string_view, Filter>& filters() {
  static const std::unordered_map<std::string_view, Filter> table = {
      {"abs", abs_filter},
      {"batch", batch},
      {"capitalize", case_filter<[](const std::string& s) { return capitalize(s); }>},
      {"center", center},
      {"count", length_filter},
      {"d", default_filter},
      {"default", default_filter},
      {"dictsort", dictsort},
      {"e", escape},
      {"escape", escape},
      {"first", [](const Value& v, const Arguments& args) { return first_or_last(v, args, false); }},
      {"float", float_filter},
      {"indent", indent},
      {"int", int_filter},
      {"items", items},
      {"join", join},
      {"last", [](const Value& v, const Arguments& args) { return first_or_last(v, args, true); }},
      {"length", length_filter},
      {"list",
       [](const Value& v, const Arguments& args) {
         no_arguments(args, "list");
         return Value(iterate(v));
       }},
      {"lower", case_filter<[](std::string s) { return to_lower(std::move(s)); }>},
      {"map", map_filter},
      {"max", [](const Value& v, const Arguments& args) { return min_or_max(v, args, true); }},
      {"min", [](const Value& v, const Arguments& args) { return min_or_max(v, args, false); }},
      {"reject", [](const Value& v, const Arguments& args) { return select(v, args, false, false); }},
      {"rejectattr", [](const Value& v, const Arguments& args) { return select(v, args, false, true); }},
      {"replace", replace_filter},
      {"reverse", reverse},
      {"round", round_filter},
      {"safe",
       [](const Value& v, const Arguments& args) {
         no_arguments(args, "safe");
         return v;
       }},
      {"select", [](const Value& v, const Arguments& args) { return select(v, args, true, false); }},
      {"selectattr", [](const Value& v, const Arguments& args) { return select(v, args, true, true); }},
      {"sort", sort_filter},
      {"string",
       [](const Value& v, const Arguments& args) {
         no_arguments(args, "string");
         return Value(v.to_string());
       }},
      {"sum", sum},
      {"title", title_filter},
      {"tojson", tojson},
      {"trim", trim},
      {"truncate", truncate},
      {"unique", unique},
      {"upper", case_filter<[](std::string s) { return to_upper(std::move(s)); }>},
      {"wordcount", wordcount},
  };
  return table;
}

bool equal(const Value& a, const Value& b) { return a == b; }
bool not_equal(const Value& a, const Value& b) { return !(a == b); }
bool less(const Value& a, const Value& b) { return a.less(b); }
bool less_equal(const Value& a, const Value& b) { return a.less(b) || a == b; }
bool greater(const Value& a, const Value& b) { return b.less(a); }
bool greater_equal(const Value& a, const Value& b) { return b.less(a) || a == b; }

template <bool (*Compare)(const Value&, const Value&)>
bool compare(const Value& input, const Arguments& args) {
  return Compare(input, args.bind("comparison", {"other"})[0]);
}

template <auto Is>
bool kind_test(const Value& input, const Arguments& args) {
  no_arguments(args, "test");
  return Is(input);
}

int64_t integer_input(const Value& input) {
  if (!input.is_number() || input.kind() == Value::Kind::Float) failure("expected an integer, got '{}'", input.type_name());
  return input.as_int();
}

const std::unordered_map<std::string_view, Test>& tests() {
  using K = Value::Kind;
  static const std::unordered_map<std::string_view, Test> table = {
      {"defined", kind_test<[](const Value& v) { return !v.is_undefined(); }>},
      {"undefined", kind_test<[](const Value& v) { return v.is_undefined(); }>},
      {"none", kind_test<[](const Value& v) { return v.is_none(); }>},
      {"boolean", kind_test<[](const Value& v) { return v.kind() == K::Bool; }>},
      {"true", kind_test<[](const Value& v) { return v.kind() == K::Bool && v.as_bool(); }>},
      {"false", kind_test<[](const Value& v) { return v.kind() == K::Bool && !v.as_bool(); }>},
      {"integer", kind_test<[](const Value& v) { return v.kind() == K::Int; }>},
      {"float", kind_test<[](const Value& v) { return v.kind() == K::Float; }>},
      {"number", kind_test<[](const Value& v) { return v.is_number(); }>},
      {"string", kind_test<[](const Value& v) { return v.is_string(); }>},
      {"mapping", kind_test<[](const Value& v) { return v.is_object(); }>},
      // Jinja's undefined can be iterated (as empty) and has a length (0).
      {"iterable", kind_test<[](const Value& v) { return v.is_string() || v.is_array() || v.is_object() || v.is_undefined(); }>},
      {"sequence", kind_test<[](const Value& v) { return v.is_string() || v.is_array() || v.is_object() || v.is_undefined(); }>},
      {"callable", kind_test<[](const Value& v) { return v.is_function(); }>},
      {"lower", kind_test<[](const Value& v) { return v.is_string() && to_lower(v.str()) == v.str(); }>},
      {"upper", kind_test<[](const Value& v) { return v.is_string() && to_upper(v.str()) == v.str(); }>},
      {"odd", kind_test<[](const Value& v) { return integer_input(v) % 2 != 0; }>},
      {"even", kind_test<[](const Value& v) { return integer_input(v) % 2 == 0; }>},
      {"divisibleby",
       [](const Value& v, const Arguments& args) {
         const int64_t divisor = integer(args.bind("divisibleby", {"num"})[0], 0, "divisor");
         if (divisor == 0) failure("integer division or modulo by zero");
         return divisor == -1 || integer_input(v) % divisor == 0;
       }},
      {"in", [](const Value& v, const Arguments& args) { return contains(args.bind("in", {"seq"})[0], v); }},
      {"eq", compare<equal>},
      {"equalto", compare<equal>},
      {"==", compare<equal>},
      {"ne", compare<not_equal>},
      {"!=", compare<not_equal>},
      {"lt", compare<less>},
      {"lessthan", compare<less>},
      {"<", compare<less>},
      {"le", compare<less_equal>},
      {"<=", compare<less_equal>},
      {"gt", compare<greater>},
      {"greaterthan", compare<greater>},
      {">", compare<greater>},
      {"ge", compare<greater_equal>},
      {">=", compare<greater_equal>},
  };
  return table;
}

}  // namespace

Filter find_filter(std::string_view name) {
  const auto it = filters().find(name);
  return it == filters().end() ? nullptr : it->second;
}

Test find_test(std::string_view name) {
  const auto it = tests().find(name);
  return it == tests().end() ? nullptr : it->second;
}

}  // namespace epq::text::jinja
