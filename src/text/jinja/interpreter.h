#pragma once
// Runs a parsed template. Variables live in a chain of scopes: the globals, then the
// render context, then one scope per macro call and one per loop iteration. "set" writes
// to the innermost scope, so, as in Jinja, an assignment inside a loop is gone when the
// iteration ends: templates carry state out of loops in namespace() objects.
// Limits keep a hostile or broken template from taking the process down: macro calls
// nest at most 256 deep, a render does at most the work of RenderOptions::max_statements
// statements and loop iterations (see WorkBudget), and its output is at most kMaxBytes.
#include <string>

#include "text/jinja/ast.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace epq::text::jinja {

// context: an object whose keys become the template's variables.
std::string render(const Program& program, const Value& context, const RenderOptions& options);

}  // namespace epq::text::jinja
