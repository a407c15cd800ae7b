#include "text/jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "text/byte_unicode.h"

namespace epq::text::jinja {
namespace {

bool is_whitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] != '\r') {
      out += source[i];
    } else {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t open = find_open(pos);
      if (open == std::string::npos) {
        push(TokenKind::Text, src_.substr(pos), pos);
        break;
      }
      const char kind = src_[open + 1];
      const char modifier = open + 2 < src_.size() && (src_[open + 2] == '-' || src_[open + 2] == '+') ? src_[open + 2] : 0;
      text(pos, open, modifier, kind != '{');
      const size_t inside = open + 2 + (modifier != 0 ? 1 : 0);
      if (kind == '#') {
        pos = comment(open, inside);
      } else if (std::optional<size_t> end = kind == '%' ? raw(open, inside) : std::nullopt) {
        pos = *end;
      } else {
        pos = tag(open, inside, kind == '%');
      }
    }
    push(TokenKind::End, "", src_.size());
    return std::move(tokens_);
  }

 private:
  Location location(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const auto line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  void push(TokenKind kind, std::string text, size_t offset) { tokens_.push_back({kind, std::move(text), location(offset)}); }

  bool at(size_t p, std::string_view s) const { return src_.compare(p, s.size(), s) == 0; }

  size_t skip_whitespace(size_t p) const {
    while (p < src_.size() && is_whitespace(src_[p])) ++p;
    return p;
  }

  size_t find_open(size_t p) const {
    for (p = src_.find('{', p); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
    }
    return std::string::npos;
  }

  // The whitespace rules at a tag's end: "-" strips all that follows, trim_blocks one newline.
  size_t after_tag(size_t p, char modifier, bool trim_blocks) const {
    if (modifier == '-') return skip_whitespace(p);
    if (trim_blocks && modifier != '+' && p < src_.size() && src_[p] == '\n') return p + 1;
    return p;
  }

  // The text before a tag, with the tag's whitespace rule applied to its end.
  void text(size_t from, size_t to, char modifier, bool before_block) {
    std::string t = src_.substr(from, to - from);
    if (modifier == '-') {
      while (!t.empty() && is_whitespace(t.back())) t.pop_back();
    } else if (before_block && modifier != '+') {  // lstrip_blocks
      const size_t newline = t.rfind('\n');
      const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
      const bool starts_line = line_start > 0 || from == 0 || src_[from - 1] == '\n';
      if (starts_line && t.find_first_not_of(" \t", line_start) == std::string::npos) t.resize(line_start);
    }
    if (!t.empty()) push(TokenKind::Text, std::move(t), from);
  }

  size_t comment(size_t open, size_t inside) {
    const size_t close = src_.find("#}", inside);
    if (close == std::string::npos) fail_at(location(open), "unclosed comment (missing #})");
    const char modifier = close > inside && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    return after_tag(close + 2, modifier, true);
  }

  // "{% raw %}...{% endraw %}": the text between, or nullopt if the tag is not "raw".
  std::optional<size_t> raw(size_t open, size_t inside) {
    size_t p = skip_whitespace(inside);
    if (!at(p, "raw") || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) return std::nullopt;
    p = skip_whitespace(p + 3);
    const char open_modifier = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
    if (open_modifier != 0) ++p;
    if (!at(p, "%}")) return std::nullopt;
    const size_t content = open_modifier == '-' ? skip_whitespace(p + 2) : p + 2;
    for (size_t e = src_.find("{%", content); e != std::string::npos; e = src_.find("{%", e + 2)) {
      size_t q = e + 2;
      const char end_modifier = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (end_modifier != 0) ++q;
      q = skip_whitespace(q);
      if (!at(q, "endraw")) continue;
      q = skip_whitespace(q + 6);
      const char close_modifier = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (close_modifier != 0) ++q;
      if (!at(q, "%}")) continue;
      std::string t = src_.substr(content, e - content);
      if (end_modifier == '-') {
        while (!t.empty() && is_whitespace(t.back())) t.pop_back();
      }
      if (!t.empty()) push(TokenKind::Text, std::move(t), content);
      return after_tag(q + 2, close_modifier, true);
    }
    fail_at(location(open), "unclosed raw block (missing {% endraw %})");
  }

  // The tokens of a {% %} or {{ }} tag; returns the position after it.
  size_t tag(size_t open, size_t p, bool block) {
    push(block ? TokenKind::BlockOpen : TokenKind::OutputOpen, "", open);
    const std::string_view close = block ? "%}" : "}}";
    std::vector<char> brackets;
    while (true) {
      p = skip_whitespace(p);
      if (p >= src_.size()) fail_at(location(open), block ? "unclosed tag (missing %})" : "unclosed expression (missing }})");
      if (brackets.empty()) {
        const char modifier = (src_[p] == '-' || (block && src_[p] == '+')) && at(p + 1, close) ? src_[p] : 0;
        const size_t q = p + (modifier != 0 ? 1 : 0);
        if (at(q, close)) {
          push(block ? TokenKind::BlockClose : TokenKind::OutputClose, "", p);
          return after_tag(q + 2, modifier, block);
        }
      }
      const char c = src_[p];
      if (is_name_start(c)) {
        const size_t start = p;
        while (p < src_.size() && is_name_char(src_[p])) ++p;
        push(TokenKind::Name, src_.substr(start, p - start), start);
      } else if (is_digit(c)) {
        p = number(p);
      } else if (c == '\'' || c == '"') {
        p = string_literal(p);
      } else {
        p = operator_token(p, brackets);
      }
    }
  }

  size_t number(size_t p) {
    const size_t start = p;
    std::string digits;
    auto take_digits = [&] {
      while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])))) {
        if (src_[p] != '_') digits += src_[p];
        ++p;
      }
    };
    take_digits();
    // After "." (as in items.0.name) only an integer: the next "." is another attribute.
    const bool after_dot = !tokens_.empty() && tokens_.back().kind == TokenKind::Operator && tokens_.back().text == ".";
    bool is_float = false;
    if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
      is_float = true;
      digits += src_[p++];
      take_digits();
    }
    if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) {
        is_float = true;
        digits += src_.substr(p, q - p);
        p = q;
        take_digits();
      }
    }
    push(is_float ? TokenKind::Float : TokenKind::Integer, std::move(digits), start);
    return p;
  }

  // A quoted string; escapes are decoded as Python's unicode-escape codec does, which is
  // what Jinja applies.
  size_t string_literal(size_t p) {
    const size_t start = p;
    const char quote = src_[p++];
    std::string value;
    auto code_point = [&](int digits, int base) {
      uint32_t cp = 0;
      for (int i = 0; i < digits; ++i) {
        const int d = p < src_.size() ? hex_value(src_[p]) : -1;
        if (d < 0 || d >= base) {
          if (base == 8 && i > 0) break;  // octal escapes take one to three digits
          fail_at(location(p), "truncated escape sequence in string");
        }
        cp = cp * static_cast<uint32_t>(base) + static_cast<uint32_t>(d);
        ++p;
      }
      if (cp > 0x10FFFF) fail_at(location(p), "escape sequence out of Unicode range");
      append_utf8(value, cp);
    };
    while (true) {
      if (p >= src_.size()) fail_at(location(start), "unterminated string");
      const char c = src_[p++];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (p >= src_.size()) fail_at(location(start), "unterminated string");
      const char e = src_[p++];
      switch (e) {
        case '\n': break;  // line continuation
        case '\\':
        case '\'':
        case '"': value += e; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'n': value += '\n'; break;
        case 'r': value += '\r'; break;
        case 't': value += '\t'; break;
        case 'v': value += '\v'; break;
        case 'x': code_point(2, 16); break;
        case 'u': code_point(4, 16); break;
        case 'U': code_point(8, 16); break;
        case 'N': fail_at(location(p - 2), "\\N{...} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            --p;
            code_point(3, 8);
          } else {
            value += '\\';  // unknown escapes stay as written
            value += e;
          }
      }
    }
    push(TokenKind::String, std::move(value), start);
    return p;
  }

  size_t operator_token(size_t p, std::vector<char>& brackets) {
    for (std::string_view two : {"**", "//", "==", "!=", "<=", ">="}) {
      if (at(p, two)) {
        push(TokenKind::Operator, std::string(two), p);
        return p + 2;
      }
    }
    const char c = src_[p];
    if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos) {
      const auto byte = static_cast<unsigned char>(c);
      fail_at(location(p), byte < 0x20 || byte >= 0x7f ? fmt::format("unexpected byte 0x{:02x}", byte) : fmt::format("unexpected character '{}'", c));
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c);
    } else if (c == ')' || c == ']' || c == '}') {
      const char opening = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (brackets.empty() || brackets.back() != opening) fail_at(location(p), fmt::format("unexpected '{}'", c));
      brackets.pop_back();
    }
    push(TokenKind::Operator, std::string(1, c), p);
    return p + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace epq::text::jinja
