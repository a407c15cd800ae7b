#include "text/jinja/template.h"

#include <fmt/format.h>

#include "text/jinja/interpreter.h"
#include "text/jinja/parser.h"

namespace epq::text::jinja {
namespace {

template <typename Json>
std::string render_json(const Program& program, const Json& context, const RenderOptions& options) {
  if (!context.is_object()) throw Error("template context must be a JSON object");
  Value variables;
  try {
    variables = Value::from_json(context);
  } catch (const Failure& f) {
    throw Error(fmt::format("template context: {}", f.what()));
  }
  return jinja::render(program, variables, options);
}

}  // namespace

Template::Template(std::string_view source) : program_(std::make_unique<const Program>(parse(source))) {}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  return render_json(*program_, context, options);
}

std::string Template::render(const nlohmann::json& context, const RenderOptions& options) const {
  return render_json(*program_, context, options);
}

}  // namespace epq::text::jinja
