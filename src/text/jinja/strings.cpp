#include "text/jinja/strings.h"

#include <algorithm>

#include "text/byte_unicode.h"
#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/value.h"

namespace epq::text::jinja {
namespace {

bool is_ascii_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

std::vector<std::string_view> code_points(const std::string& s) {
  WorkBudget::charge_bytes(s.size());
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    next_code_point(s, i);
    out.push_back(std::string_view(s).substr(start, i - start));
  }
  return out;
}

int64_t count_code_points(const std::string& s) {
  WorkBudget::charge_bytes(s.size());
  int64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

std::string strip(const std::string& s, Side side, const std::optional<std::string>& chars) {
  const std::vector<std::string_view> points = code_points(s);
  const std::vector<std::string_view> set = chars ? code_points(*chars) : std::vector<std::string_view>{};
  auto strippable = [&](std::string_view p) {
    if (!chars) return p.size() == 1 && is_space(p[0]);
    return std::find(set.begin(), set.end(), p) != set.end();
  };
  size_t begin = 0, end = points.size();
  if (side != Side::Right) {
    while (begin < end && strippable(points[begin])) ++begin;
  }
  if (side != Side::Left) {
    while (end > begin && strippable(points[end - 1])) --end;
  }
  if (begin == end) return "";
  const size_t from = static_cast<size_t>(points[begin].data() - s.data());
  const size_t to = static_cast<size_t>(points[end - 1].data() + points[end - 1].size() - s.data());
  return s.substr(from, to - from);
}

std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) failure("empty separator");
    size_t start = 0;
    for (size_t at; (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) && (at = s.find(*sep, start)) != std::string::npos;) {
      out.push_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.push_back(s.substr(start));
    return out;
  }
  size_t i = 0;
  while (true) {
    while (i < s.size() && is_space(s[i])) ++i;
    if (i == s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(s.substr(i));  // the rest, trailing whitespace included
      break;
    }
    const size_t start = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  std::string out;
  int64_t done = 0;
  auto allowed = [&] { return count < 0 || done < count; };
  if (old.empty()) {  // Python inserts the replacement around every character
    for (std::string_view p : code_points(s)) {
      if (allowed()) {
        out += with;
        ++done;
      }
      out += p;
      check_bytes(out.size());
    }
    if (allowed()) out += with;
    return out;
  }
  size_t start = 0;
  for (size_t at; allowed() && (at = s.find(old, start)) != std::string::npos; ++done) {
    out.append(s, start, at - start);
    out += with;
    check_bytes(out.size());
    start = at + old.size();
  }
  out.append(s, start);
  return out;
}

int64_t find(const std::string& s, const std::string& sub) {
  const size_t at = s.find(sub);
  if (at == std::string::npos) return -1;
  return count_code_points(s.substr(0, at));
}

std::string to_upper(std::string s) {
  for (char& c : s) c = upper(c);
  return s;
}

std::string to_lower(std::string s) {
  for (char& c : s) c = lower(c);
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = to_lower(s);
  if (!out.empty()) out[0] = upper(out[0]);
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool previous_cased = false;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (is_ascii_letter(u)) {
      c = previous_cased ? lower(c) : upper(c);
      previous_cased = true;
    } else {
      previous_cased = u >= 0x80;  // other scripts: treated as letters, left as they are
    }
  }
  return out;
}

}  // namespace epq::text::jinja
