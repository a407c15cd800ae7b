#include "text/chat_template.h"

#include "text/chat_message.h"
#include "util/error.h"

namespace epq::text {

ChatTemplate::ChatTemplate(const gguf::File& file, const Tokenizer& tokenizer, const std::optional<std::string>& override_source) {
  if (tokenizer.bos()) bos_ = tokenizer.piece(*tokenizer.bos());
  if (tokenizer.eos()) eos_ = tokenizer.piece(*tokenizer.eos());
  const gguf::Value* stored = file.find("tokenizer.chat_template");
  const std::string* source = override_source ? &*override_source
                              : stored && stored->type() == gguf::ValueType::STRING ? &stored->as_string()
                                                                                     : nullptr;
  if (source == nullptr) return;
  if (source->size() > kMaxSourceBytes) {
    fail("the chat template is {} bytes, more than the limit of {}", source->size(), kMaxSourceBytes);
  }
  jinja_.emplace(*source);
}

std::string ChatTemplate::render(nlohmann::ordered_json messages, nlohmann::ordered_json tools, bool add_generation_prompt,
                                 nlohmann::ordered_json extra) const {
  if (!jinja_) {
    std::vector<ChatMessage> m;
    for (const auto& msg : messages) {
      const auto content = msg.value("content", nlohmann::ordered_json());
      m.push_back({msg.value("role", ""), content.is_string() ? content.get<std::string>() : ""});
    }
    return render_chatml(m, add_generation_prompt);
  }
  nlohmann::ordered_json context = extra.is_object() ? std::move(extra) : nlohmann::ordered_json::object();
  context["messages"] = std::move(messages);
  if (!tools.is_null()) context["tools"] = std::move(tools);
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_;
  context["eos_token"] = eos_;
  return jinja_->render(context);
}

}  // namespace epq::text
