#pragma once
// Jinja's builtin filters ({{ x | trim }}) and tests ({% if x is defined %}), those chat
// templates use. tojson is HuggingFace's: json.dumps with ensure_ascii off and no HTML
// escaping, taking ensure_ascii, indent, separators and sort_keys.
//
// Filters: abs, batch, capitalize, center, count, default (d), dictsort, escape (e),
// first, float, indent, int, items, join, last, length, list, lower, map, max, min,
// reject, rejectattr, replace, reverse, round, safe, select, selectattr, sort, string,
// sum, title, tojson, trim, truncate, unique, upper, wordcount.
// Tests: defined, undefined, none, boolean, true, false, integer, float, number, string,
// mapping, iterable, sequence, callable, odd, even, divisibleby, eq (equalto, ==),
// ne (!=), lt (lessthan, <), le (<=), gt (greaterthan, >), ge (>=), in, lower, upper.
#include <string_view>

#include "text/jinja/value.h"

namespace epq::text::jinja {

using Filter = Value (*)(const Value& input, const Arguments& args);
using Test = bool (*)(const Value& input, const Arguments& args);

Filter find_filter(std::string_view name);  // nullptr if there is none
Test find_test(std::string_view name);      // nullptr if there is none

}  // namespace epq::text::jinja
