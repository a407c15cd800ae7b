#pragma once
// Parses template source into a Program, with Jinja's grammar and operator precedence
// (loosest first): "x if c else y", or, and, not, comparisons and in / not in, + -, ~,
// * / // %, **, unary -, then filters (|f) and tests (is t) on the operand, which has
// postfix .attribute, [index], [a:b:c] and (call) parts.
// Tags: if/elif/else, for/else (with "if" filter and tuple targets), set (plain, tuple,
// namespace attribute, block), macro, break, continue, and HuggingFace's generation
// block, which renders its body. Other tags (include, extends, call, filter, ...) are
// errors, as are unknown filters and tests.
#include <string_view>

#include "text/jinja/ast.h"

namespace epq::text::jinja {

// Throws epq::Error "template:LINE:COLUMN: ..." on a syntax error.
Program parse(std::string_view source);

}  // namespace epq::text::jinja
