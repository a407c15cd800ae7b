#include "text/chat_template.h"

#include "text/chat_message.h"
#include "util/error.h"

namespace epq::text {

ChatTemplate::ChatTemplate(const gguf::File& file, const Tokenizer& tokenizer, const std::optional<std::string>& override_source) {
  if (tokenizer.bos()) bos_ = tokenizer.piece(*tokenizer.bos());
  if (tokenizer.eos()) eos_ = tokenizer.piece(*tokenizer.eos());
  if (override_source) {
    jinja_.emplace(*override_source);
  } else if (const gguf::Value* t = file.find("tokenizer.chat_template"); t && t->type() == gguf::ValueType::STRING) {
    jinja_.emplace(t->as_string());
  }
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const {
  if (!jinja_) {
    std::vector<ChatMessage> m;
    for (const auto& msg : messages) {
      const auto content = msg.value("content", nlohmann::ordered_json());
      m.push_back({msg.value("role", ""), content.is_string() ? content.get<std::string>() : ""});
    }
    return render_chatml(m, add_generation_prompt);
  }
  nlohmann::ordered_json context = extra.is_object() ? extra : nlohmann::ordered_json::object();
  context["messages"] = messages;
  if (!tools.is_null()) context["tools"] = tools;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_;
  context["eos_token"] = eos_;
  return jinja_->render(context);
}

}  // namespace epq::text
