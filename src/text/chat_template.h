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
  // extra: template variables such as enable_thinking. Throws Error if the template fails.
  // Taken by value: callers that are done with them move them in.
  std::string render(nlohmann::ordered_json messages, nlohmann::ordered_json tools, bool add_generation_prompt,
                     nlohmann::ordered_json extra = nlohmann::ordered_json::object()) const;
  bool is_chatml_fallback() const { return !jinja_; }

 private:
  std::optional<jinja::Template> jinja_;
  std::string bos_, eos_;
};

}  // namespace epq::text
