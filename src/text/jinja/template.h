#pragma once
// A Jinja2 template rendered the way HuggingFace renders chat templates (a model's
// tokenizer.chat_template): trim_blocks and lstrip_blocks on, no autoescaping, Python
// semantics for values, and the globals raise_exception(message) and strftime_now(format)
// besides Jinja's range, namespace and dict. The source is parsed once; render() is const
// and may run on several threads at once.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "text/jinja/error.h"

namespace epq::text::jinja {

struct Program;

struct RenderOptions {
  // The clock time strftime_now() formats; the current local time when empty.
  std::optional<std::chrono::local_seconds> now;
  // The most work a render may do, counted in statements and loop iterations (items that
  // filters and operators walk through count 1/64 each). A long agentic conversation
  // takes some hundred thousand; a million take about half a second.
  uint64_t max_statements = 10'000'000;
};

class Template {
 public:
  // Throws epq::Error "template:LINE:COLUMN: ..." on a syntax error.
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with the context object's keys as variables: messages, tools, bos_token,
  // add_generation_prompt... Pass ordered_json (parse requests with it) so that objects
  // keep their keys' order, as Python does: tools print with tojson in that order.
  // Throws RaisedError with the template's own message when it calls raise_exception(),
  // epq::Error "template:LINE:COLUMN: ..." on any other failure ("template context: ..."
  // if the context is not an object or nests deeper than 512 levels).
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;
  std::string render(const nlohmann::json& context, const RenderOptions& options = {}) const;

 private:
  std::unique_ptr<const Program> program_;
};

}  // namespace epq::text::jinja
