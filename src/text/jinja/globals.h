#pragma once
// The functions every template can call: range, namespace (a mutable object that
// "{% set ns.x = ... %}" can change from inside loops), dict, and HuggingFace's
// raise_exception (throws RaisedError with the template's message) and strftime_now.
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace epq::text::jinja {

Object make_globals(const RenderOptions& options);

}  // namespace epq::text::jinja
