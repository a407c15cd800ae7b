#pragma once
// Splits template source into text and the tokens inside tags, as Jinja's lexer does
// with HuggingFace's settings for chat templates:
//  - trim_blocks: the first newline after a block tag (%}) or comment is dropped;
//  - lstrip_blocks: spaces and tabs from the start of a line up to a block tag or
//    comment are dropped;
//  - "{%-", "-%}", "{{-", "-}}", "{#-", "-#}" strip all whitespace on that side, and
//    "{%+" / "+%}" turn lstrip_blocks / trim_blocks off for that tag;
//  - newlines become "\n" and one trailing newline of the template is dropped.
// Comments vanish, and {% raw %}...{% endraw %} comes out as text.
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/error.h"

namespace epq::text::jinja {

enum class TokenKind {
  Text,        // template text between tags
  OutputOpen,  // {{
  OutputClose, // }}
  BlockOpen,   // {%
  BlockClose,  // %}
  Name,
  String,      // text holds the value, escapes decoded as Python does
  Integer,     // text as written, without "_"
  Float,
  Operator,    // + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } , . : |
  End,
};

struct Token {
  TokenKind kind;
  std::string text;
  Location at;
};

// Throws epq::Error at the line and column of an unclosed tag or string, or a character
// that starts no token.
std::vector<Token> tokenize(std::string_view source);

}  // namespace epq::text::jinja
