#pragma once
// Human-readable sizes and the parser for size arguments such as "8G" or "512M".
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace epq {

std::string format_bytes(uint64_t bytes);  // "1.50 GiB", "12.0 MiB", "512 B"
// Accepts a plain byte count or a number with K/M/G/T (powers of 1024, optional "iB"/"B").
std::optional<uint64_t> parse_size(std::string_view text);
// text as one printable line: control bytes, DEL and bytes that are not valid UTF-8
// become \xNN, and text past max_bytes is cut (at a character) and ends in "...".
std::string printable(std::string_view text, size_t max_bytes = 200);

}  // namespace epq
