#pragma once
// GPT-2's reversible byte <-> Unicode mapping used by byte-level BPE vocabularies:
// printable bytes map to themselves, the others to code points from U+0100 upward.
#include <cstdint>
#include <string>

namespace epq::text {

// UTF-8 encoding of the code point that stands for byte b.
const std::string& byte_to_unicode(uint8_t b);
// The byte a code point stands for, or -1 if it stands for none.
int unicode_to_byte(uint32_t code_point);

// Appends the UTF-8 encoding of a code point.
void append_utf8(std::string& out, uint32_t code_point);
// Decodes one UTF-8 sequence at s[i]; advances i. Invalid bytes decode as themselves
// (as code points 0x80..0xFF would not) with *valid = false.
uint32_t next_code_point(const std::string& s, size_t& i, bool* valid = nullptr);

}  // namespace epq::text
