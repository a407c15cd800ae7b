#pragma once
// Where a conversation's reusable prefix ends. The next turn's prompt re-renders every
// message so far, but not this turn's generation prompt (and templates such as
// Qwen3.6's re-render earlier replies without their reasoning), so the position to keep
// recurrent state at is the end of the conversation rendered without a generation prompt.
#include <cstdint>
#include <span>

#include <nlohmann/json.hpp>

#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace epq::runtime {

// The number of tokens of `prompt` (the conversation rendered with a generation prompt)
// that the conversation without one shares with it, when those tokens are a prefix of
// prompt; 0 otherwise.
int32_t conversation_checkpoint(const text::ChatTemplate& chat_template, const text::Tokenizer& tokenizer,
                                nlohmann::ordered_json messages, nlohmann::ordered_json tools, nlohmann::ordered_json extra,
                                std::span<const int32_t> prompt);

}  // namespace epq::runtime
