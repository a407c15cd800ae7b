#pragma once
// What the template language's operators and accessors do to values, with Python's
// semantics: arithmetic, "in", subscripts and slices (strings by code point), attribute
// lookup, iteration and len(). All throw Failure on a type error.
#include <cstdint>
#include <string_view>

#include "text/jinja/value.h"

namespace epq::text::jinja {

enum class BinaryOp { Add, Subtract, Multiply, Divide, FloorDivide, Modulo, Power, Concat };

Value binary(BinaryOp op, const Value& a, const Value& b);
Value negate(const Value& v);
bool contains(const Value& container, const Value& item);  // "item in container"

// obj.name, as Jinja looks it up: a method of that name if the type has one (so
// dict.items is the method), else a dict's key; undefined when neither exists, including
// on undefined itself.
Value get_attribute(const Value& object, std::string_view name);
// obj[key]: a list or string index (negative counts from the end) or a dict's key, else
// a method named by a string key; undefined when out of range or missing.
Value get_item(const Value& object, const Value& key);
// obj[start:stop:step]; an undefined or none bound is omitted.
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);

// What a for loop visits: list items, dict keys, string characters; nothing for undefined.
Array iterate(const Value& v);
int64_t length(const Value& v);  // len(); 0 for undefined

}  // namespace epq::text::jinja
