#pragma once
// Chat messages and the ChatML rendering used when a model has no template of its own.
#include <string>
#include <vector>

namespace epq::text {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
};

// <|im_start|>role\ncontent<|im_end|>\n ... [+ <|im_start|>assistant\n]
std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt);

}  // namespace epq::text
