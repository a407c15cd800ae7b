#include "runtime/conversation_checkpoint.h"

#include <algorithm>

namespace epq::runtime {

int32_t conversation_checkpoint(const text::ChatTemplate& chat_template, const text::Tokenizer& tokenizer,
                                nlohmann::ordered_json messages, nlohmann::ordered_json tools, nlohmann::ordered_json extra,
                                std::span<const int32_t> prompt) {
  const std::vector<int32_t> history =
      tokenizer.encode_prompt(chat_template.render(std::move(messages), std::move(tools), false, std::move(extra)), true);
  if (history.size() >= prompt.size() || !std::equal(history.begin(), history.end(), prompt.begin())) return 0;
  return static_cast<int32_t>(history.size());
}

}  // namespace epq::runtime
