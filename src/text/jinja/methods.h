#pragma once
// The Python methods that templates call on values. Strings: strip, lstrip, rstrip,
// split, startswith, endswith, upper, lower, title, capitalize, replace, find, count,
// join, format (plain {} / {0} / {name} fields). Dicts: get, items, keys, values.
// Lists: append.
#include <optional>
#include <string_view>

#include "text/jinja/value.h"

namespace epq::text::jinja {

// The method of that name on self's type, bound to self; nullopt if there is none.
std::optional<Value> find_method(const Value& self, std::string_view name);

}  // namespace epq::text::jinja
