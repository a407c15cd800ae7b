#include "text/byte_unicode.h"

#include <array>

namespace epq::text {
namespace {

bool maps_to_itself(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

struct Tables {
  std::array<std::string, 256> to_unicode;
  std::array<int, 512> to_byte;  // code points below 0x200 cover every mapped value
  Tables() {
    to_byte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = maps_to_itself(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
      append_utf8(to_unicode[b], cp);
      to_byte[cp] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return tables().to_unicode[b]; }

int unicode_to_byte(uint32_t code_point) {
  return code_point < 512 ? tables().to_byte[code_point] : -1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t next_code_point(const std::string& s, size_t& i, bool* valid) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t c = byte(i);
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
  for (int k = 1; ok && k < len; ++k) ok = (byte(i + static_cast<size_t>(k)) & 0xC0) == 0x80;
  if (valid) *valid = ok;
  if (!ok) {
    ++i;
    return c;
  }
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (byte(i + static_cast<size_t>(k)) & 0x3Fu);
  i += static_cast<size_t>(len);
  return cp;
}

}  // namespace epq::text
