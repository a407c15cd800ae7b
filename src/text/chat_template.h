#pragma once
// Renders a conversation into a prompt with the model's own chat template
// (tokenizer.chat_template, Jinja), or ChatML when the file has none.
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/file.h"
#include "text/jinja/template.h"
#include "text/tokenizer.h"

namespace epq::text {

class ChatTemplate {
 public:
  // Larger template sources are refused (real ones are tens of KiB).
  static constexpr size_t kMaxSourceBytes = 1 << 20;
  // override_source: a template to use instead of the file's (e.g. --chat-template FILE).
  ChatTemplate(const gguf::File& file, const Tokenizer& tokenizer, const std::optional<std::string>& override_source = std::nullopt);
  // messages: [{"role": ..., "content": ...}, ...] as in the OpenAI API; tools may be null;
  // extra: template variables such as enable_thinking; options: the render's clock and work
  // limit. Throws Error if the template fails. Taken by value: callers that are done with
  // them move them in.
  std::string render(nlohmann::ordered_json messages, nlohmann::ordered_json tools, bool add_generation_prompt,
                     nlohmann::ordered_json extra = nlohmann::ordered_json::object(),
                     const jinja::RenderOptions& options = {}) const;
  bool is_chatml_fallback() const { return !jinja_; }
  // The template needs a tool call's arguments as an object: given the JSON text that OpenAI
  // clients send, it fails (Qwen3.5/3.6: `arguments|items`) or quotes the text once more
  // (Llama 3, Mistral, gpt-oss: `arguments|tojson`). render() then parses such texts into
  // objects first. Found once, at construction, by rendering a probe tool call both ways.
  bool wants_object_arguments() const { return object_arguments_; }

 private:
  std::string render_jinja(nlohmann::ordered_json messages, nlohmann::ordered_json tools, bool add_generation_prompt,
                           nlohmann::ordered_json extra, const jinja::RenderOptions& options = {}) const;

  std::optional<jinja::Template> jinja_;
  std::string bos_, eos_;
  bool object_arguments_ = false;
};

}  // namespace epq::text
