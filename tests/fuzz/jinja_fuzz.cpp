// Fuzz target: no template and no conversation may crash or hang the chat template engine.
// The input is a template source, a NUL byte, and a JSON request body as a client sends it
// (messages, tools, chat_template_kwargs), read by the server's own parser; without a NUL,
// or when that part is no valid chat request, a fixed conversation with a tool call is
// rendered. The input's length picks add_generation_prompt. A bad template must end in
// epq::Error (RaisedError included), at construction or rendering; anything else is a bug.
// Renders get a hundredth of the server's work limit, so that a slow template costs a
// hundredth of the time; what only the full limit reaches (a chain of lists a million
// deep) has unit tests (JinjaLimits in tests/unit/jinja_test.cpp).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"
#include "synth_tokenizer_file.h"
#include "text/chat_template.h"
#include "text/jinja/template.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace {

using Json = nlohmann::ordered_json;

struct Model {
  epq::gguf::File file = epq::fuzz::synth_tokenizer_file("qwen2");
  epq::text::Tokenizer tokenizer = epq::text::Tokenizer::from_gguf(file);
};

const Model& model() {
  static const Model m;
  return m;
}

const Json& default_conversation() {
  static const Json messages = Json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call1", "type": "function",
      "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "content": "sunny"},
    {"role": "assistant", "content": "<think>easy</think>It is sunny."},
    {"role": "user", "content": "Thanks"}])");
  return messages;
}

epq::text::jinja::RenderOptions render_options() {
  using namespace std::chrono;
  epq::text::jinja::RenderOptions options;
  options.now = local_days(year(2025) / March / 7) + hours(14);
  options.max_statements = 100'000;
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)model();
  (void)default_conversation();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source(input.substr(0, nul));
  epq::server::CompletionRequest request;
  request.messages = default_conversation();
  if (nul != std::string_view::npos) {
    try {
      request = epq::server::parse_completion_request(std::string(input.substr(nul + 1)), true);
    } catch (const epq::server::ApiError&) {
    }
  }
  try {
    const epq::text::ChatTemplate chat_template(model().file, model().tokenizer, source);
    (void)chat_template.render(std::move(request.messages), std::move(request.tools), size % 2 == 1,
                               std::move(request.template_kwargs), render_options());
  } catch (const epq::Error&) {
  }
  return 0;
}
