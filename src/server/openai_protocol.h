#pragma once
// The OpenAI-compatible wire format: parsing and validating /v1/chat/completions and
// /v1/completions requests, and building responses, stream chunks and error objects.
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/generate.h"

namespace epq::server {

// An error the client caused (4xx) or the server hit (5xx), as an OpenAI error object.
class ApiError : public std::runtime_error {
 public:
  ApiError(int http_status, std::string error_type, const std::string& message, std::string error_code = "", std::string error_param = "")
      : std::runtime_error(message),
        status(http_status),
        type(std::move(error_type)),
        code(std::move(error_code)),
        param(std::move(error_param)) {}
  nlohmann::json to_json() const;
  std::string body() const;  // to_json() as text; bytes that are not UTF-8 are replaced
  int status;
  std::string type, code, param;
};

ApiError invalid_request(const std::string& message, const std::string& param = "");

struct CompletionRequest {
  bool chat = true;
  std::string model;
  // Chat fields keep the client's key order (templates print tools with tojson).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // optional
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  std::string prompt;                                 // completions
  bool stream = false;
  bool include_usage = false;
  runtime::GenerateOptions generate;
};

inline constexpr int kMaxJsonDepth = 64;  // nesting of arrays and objects in a request

// A request body as JSON: ApiError (400) for bad syntax, numbers out of range and values
// nested deeper than kMaxJsonDepth, which are refused while parsing.
nlohmann::ordered_json parse_request_json(std::string_view body);
// Throws ApiError (400) naming the offending field. max_tokens bounds what the request may
// ask for; a request that does not ask gets 256, or max_tokens if that is less.
CompletionRequest parse_completion_request(const std::string& body, bool chat, int max_tokens = runtime::kMaxGeneratedTokens);

struct Reply {
  std::string id;
  std::string model;
  int64_t created = 0;
  bool chat = true;
};

// The choice's `logprobs`: for chat {"content": [{token, logprob, bytes, top_logprobs}]},
// for completions {tokens, token_logprobs, top_logprobs, text_offset}.
nlohmann::json logprobs_json(bool chat, const std::vector<runtime::TokenLogprob>& logprobs,
                             const std::function<std::string(int32_t)>& token_text);
// `logprobs` null for none (completions then report null, chat leaves the field out).
nlohmann::json completion_response(const Reply& reply, const std::string& content, const std::string& reasoning,
                                   const std::string& finish_reason, int prompt_tokens, int cached_tokens,
                                   int completion_tokens, const nlohmann::json& logprobs = nullptr);
// A stream chunk with a delta; finish_reason empty for null.
nlohmann::json completion_chunk(const Reply& reply, const nlohmann::json& delta_or_text, const std::string& finish_reason);
nlohmann::json usage_chunk(const Reply& reply, int prompt_tokens, int cached_tokens, int completion_tokens);

}  // namespace epq::server
