#pragma once
// Python's str operations on UTF-8 strings, shared by the string methods and filters.
// Indexes and lengths count code points. Case mapping and the default whitespace are
// ASCII only: other characters are left as they are and are not whitespace.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace epq::text::jinja {

// The bytes of each code point (an invalid byte counts as one).
std::vector<std::string_view> code_points(const std::string& s);
int64_t count_code_points(const std::string& s);

bool is_space(char c);

enum class Side { Both, Left, Right };
// str.strip/lstrip/rstrip: whitespace, or any of the code points in chars.
std::string strip(const std::string& s, Side side, const std::optional<std::string>& chars = std::nullopt);
// str.split: on runs of whitespace (dropping empty pieces) without sep; at most maxsplit
// splits when maxsplit >= 0. Throws Failure for an empty sep.
std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
// str.replace: at most count replacements when count >= 0.
std::string replace(const std::string& s, const std::string& old, const std::string& with, int64_t count);
// str.find: the code point index of the first occurrence of sub, or -1.
int64_t find(const std::string& s, const std::string& sub);

std::string to_upper(std::string s);
std::string to_lower(std::string s);
std::string capitalize(const std::string& s);  // first character upper, the rest lower
std::string title(const std::string& s);  // str.title: upper after each non-letter, lower elsewhere

}  // namespace epq::text::jinja
