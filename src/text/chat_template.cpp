#include "text/chat_template.h"

#include <exception>
#include <string>

#include "text/chat_message.h"
#include "util/error.h"

namespace epq::text {
namespace {

using Json = nlohmann::ordered_json;

// The probe call's one argument. A template shows it if the key appears as a JSON or Python
// object key or as an XML parameter name; as escaped text inside a JSON string it does not
// count (that is the argument text encoded once more, not shown).
const std::string kProbeKey = "epq_probe_key";

bool shows_probe_argument(const std::string& out) {
  for (const std::string& form : {"\"" + kProbeKey + "\":", "'" + kProbeKey + "':", "<parameter=" + kProbeKey + ">"}) {
    if (out.find(form) != std::string::npos) return true;
  }
  return false;
}

// A question and one call, with these arguments, of the probe tool.
Json probe_messages(Json arguments) {
  Json function = Json::object();
  function["name"] = "epq_probe";
  function["arguments"] = std::move(arguments);
  Json call = Json::object();
  call["id"] = "call00001";
  call["type"] = "function";
  call["function"] = std::move(function);
  Json assistant = Json::object();
  assistant["role"] = "assistant";
  assistant["content"] = "";
  assistant["tool_calls"] = Json::array({std::move(call)});
  Json user = Json::object();
  user["role"] = "user";
  user["content"] = "Hi";
  return Json::array({std::move(user), std::move(assistant)});
}

Json probe_tools() {
  Json parameters = Json::object();
  parameters["type"] = "object";
  parameters["properties"]["text"]["type"] = "string";  // (not the key: the call alone may show that)
  Json function = Json::object();
  function["name"] = "epq_probe";
  function["description"] = "probe";
  function["parameters"] = std::move(parameters);
  Json tool = Json::object();
  tool["type"] = "function";
  tool["function"] = std::move(function);
  return Json::array({std::move(tool)});
}

// Replaces each tool call argument text that holds a JSON object by that object.
void parse_object_arguments(Json& messages) {
  auto parse = [](Json& holder) {
    if (!holder.is_object()) return;
    auto it = holder.find("arguments");
    if (it == holder.end() || !it->is_string()) return;
    Json parsed = Json::parse(it->get_ref<const std::string&>(), nullptr, false);
    if (parsed.is_object()) *it = std::move(parsed);
  };
  if (!messages.is_array()) return;
  for (Json& m : messages) {
    if (!m.is_object()) continue;
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (Json& call : *calls) {
      parse(call);
      if (call.is_object() && call.contains("function")) parse(call["function"]);
    }
  }
}

}  // namespace

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
  // Whether the template shows a call's arguments given as an object but not given as text.
  jinja::RenderOptions probe_options;
  probe_options.max_statements = 100'000;  // real templates take some hundreds on the probe
  auto shows = [&](Json arguments) {
    try {
      return shows_probe_argument(render_jinja(probe_messages(std::move(arguments)), probe_tools(), false, Json::object(), probe_options));
    } catch (const std::exception&) {  // a template that cannot show the probe at all
      return false;
    }
  };
  Json arguments = Json::object();
  arguments[kProbeKey] = "epq probe value";
  object_arguments_ = shows(arguments) && !shows(arguments.dump());
}

std::string ChatTemplate::render(nlohmann::ordered_json messages, nlohmann::ordered_json tools, bool add_generation_prompt,
                                 nlohmann::ordered_json extra, const jinja::RenderOptions& options) const {
  if (!jinja_) {
    std::vector<ChatMessage> m;
    for (const auto& msg : messages) {
      const auto content = msg.value("content", nlohmann::ordered_json());
      m.push_back({msg.value("role", ""), content.is_string() ? content.get<std::string>() : ""});
    }
    return render_chatml(m, add_generation_prompt);
  }
  if (object_arguments_) parse_object_arguments(messages);
  return render_jinja(std::move(messages), std::move(tools), add_generation_prompt, std::move(extra), options);
}

std::string ChatTemplate::render_jinja(nlohmann::ordered_json messages, nlohmann::ordered_json tools, bool add_generation_prompt,
                                       nlohmann::ordered_json extra, const jinja::RenderOptions& options) const {
  nlohmann::ordered_json context = extra.is_object() ? std::move(extra) : nlohmann::ordered_json::object();
  context["messages"] = std::move(messages);
  if (!tools.is_null()) context["tools"] = std::move(tools);
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_;
  context["eos_token"] = eos_;
  return jinja_->render(context, options);
}

}  // namespace epq::text
