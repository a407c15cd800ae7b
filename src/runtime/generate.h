#pragma once
// The generation loop shared by `run`, `chat` and the server: evaluate the prompt, then
// sample and evaluate one token at a time until a stop condition. Text is streamed in
// whole UTF-8 characters, and text that might be the start of a stop string is held
// back until it is known not to be.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/token_logprobs.h"
#include "text/tokenizer.h"

namespace epq::runtime {

struct GenerateOptions {
  int max_tokens = 128;
  bool ignore_eos = false;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  SamplerOptions sampler;
  int logprobs = -1;  // -1: none; else each generated token's logprob and this many alternatives' (0..kMaxTopLogprobs)
  std::function<void()> after_prompt;  // called once the prompt is evaluated (optional)
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated tokens
  std::vector<TokenLogprob> logprobs;  // one per token, when options.logprobs >= 0
  std::string text;             // their text, cut at a stop string
  std::string finish_reason;    // "stop" (end of generation or stop string), "length", "cancelled"
  int prompt_tokens = 0;
  int cached_tokens = 0;  // of the prompt, reused from the session instead of evaluated (set by the caller)
  double prompt_seconds = 0;
  double generation_seconds = 0;
};

// on_text receives each new piece of text; returning false cancels generation.
GenerateResult generate(Session& session, const text::Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const std::function<bool(std::string_view)>& on_text);

// Bytes at the end of s that form an incomplete UTF-8 sequence.
size_t incomplete_utf8_suffix(std::string_view s);

}  // namespace epq::runtime
