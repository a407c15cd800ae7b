#include "server/openai_protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "util/format.h"

namespace epq::server {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

// OpenAI's usage object; cached_tokens are prompt tokens reused from the session's cache.
nlohmann::json usage(int prompt_tokens, int cached_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

double number(const ordered& body, const char* key, double lo, double hi) {
  const ordered& v = body.at(key);
  if (!v.is_number()) throw invalid_request(std::string("'") + key + "' must be a number", key);
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) throw invalid_request(std::string("'") + key + "' must be between " + fmt::format("{} and {}", lo, hi), key);
  return x;
}

int64_t integer(const ordered& body, const char* key, int64_t lo, int64_t hi) {
  const ordered& v = body.at(key);
  if (!v.is_number_integer()) throw invalid_request(std::string("'") + key + "' must be an integer", key);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) throw invalid_request(std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi), key);
  return x;
}

bool boolean(const ordered& body, const char* key) {
  const ordered& v = body.at(key);
  if (!v.is_boolean()) throw invalid_request(std::string("'") + key + "' must be a boolean", key);
  return v.get<bool>();
}

// Message content: a string, null, or an array of {"type":"text","text":...} parts.
ordered content_text(const ordered& content, size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) throw invalid_request("'" + param + "' must be a string or an array of text parts", param);
  std::string text;
  for (const ordered& part : content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") || !part["text"].is_string()) {
      throw invalid_request("'" + param + "' parts must be {\"type\": \"text\", \"text\": ...} (only text is supported)", param);
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

std::string ApiError::body() const { return to_json().dump(-1, ' ', false, json::error_handler_t::replace); }

json ApiError::to_json() const {
  return {{"error",
           {{"message", what()}, {"type", type}, {"param", param.empty() ? json() : json(param)}, {"code", code.empty() ? json() : json(code)}}}};
}

ApiError invalid_request(const std::string& message, const std::string& param) {
  return ApiError(400, "invalid_request_error", message, "", param);
}

nlohmann::ordered_json parse_request_json(std::string_view text) {
  // Deeper values are refused while parsing: copying or printing them recurses this deep.
  auto limit_depth = [](int depth, ordered::parse_event_t, ordered&) {
    if (depth > kMaxJsonDepth) throw invalid_request(fmt::format("the request body nests JSON deeper than {} levels", kMaxJsonDepth));
    return true;
  };
  try {
    return ordered::parse(text, limit_depth);
  } catch (const ordered::parse_error& e) {
    throw invalid_request(printable(std::string("the request body is not valid JSON: ") + e.what()));
  } catch (const ordered::out_of_range& e) {  // a number out of double's range, such as 1e400
    throw invalid_request(printable(std::string("the request body has a number out of range: ") + e.what()));
  }
}

CompletionRequest parse_completion_request(const std::string& text, bool chat, int max_tokens) {
  ordered body = parse_request_json(text);
  if (!body.is_object()) throw invalid_request("the request body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  if (body.contains("model")) {
    if (!body["model"].is_string()) throw invalid_request("'model' must be a string", "model");
    r.model = body["model"].get<std::string>();
  }
  if (chat) {
    if (!body.contains("messages")) throw invalid_request("'messages' is required", "messages");
    if (!body["messages"].is_array() || body["messages"].empty()) throw invalid_request("'messages' must be a non-empty array", "messages");
    for (size_t i = 0; i < body["messages"].size(); ++i) {
      ordered& message = body["messages"][i];
      const std::string param = "messages[" + std::to_string(i) + "]";
      if (!message.is_object()) throw invalid_request("'" + param + "' must be an object", param);
      ordered m = std::move(message);  // the body's parts move into the request: no second copy
      if (!m.contains("role") || !m["role"].is_string()) throw invalid_request("'" + param + ".role' must be a string", param + ".role");
      const std::string role = m["role"];
      if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer") {
        throw invalid_request("'" + param + ".role' must be system, developer, user, assistant or tool", param + ".role");
      }
      if (!m.contains("content") && !m.contains("tool_calls")) throw invalid_request("'" + param + ".content' is required", param + ".content");
      if (m.contains("content")) m["content"] = content_text(m["content"], i);
      r.messages.push_back(std::move(m));
    }
    if (body.contains("tools") && !body["tools"].is_null()) {
      if (!body["tools"].is_array()) throw invalid_request("'tools' must be an array", "tools");
      r.tools = std::move(body["tools"]);
    }
    if (body.contains("chat_template_kwargs")) {
      if (!body["chat_template_kwargs"].is_object()) throw invalid_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
      r.template_kwargs = std::move(body["chat_template_kwargs"]);
    }
  } else {
    if (!body.contains("prompt")) throw invalid_request("'prompt' is required", "prompt");
    const ordered& p = body["prompt"];
    if (p.is_string()) {
      r.prompt = p.get<std::string>();
    } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
      r.prompt = p[0].get<std::string>();
    } else {
      throw invalid_request("'prompt' must be a string (or an array holding one string)", "prompt");
    }
  }
  if (body.contains("n") && integer(body, "n", 1, 1) != 1) throw invalid_request("only n = 1 is supported", "n");
  if (body.contains("stream")) r.stream = boolean(body, "stream");
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    if (!body["stream_options"].is_object()) throw invalid_request("'stream_options' must be an object", "stream_options");
    if (body["stream_options"].contains("include_usage")) r.include_usage = boolean(body["stream_options"], "include_usage");
  }
  runtime::GenerateOptions& g = r.generate;
  g.max_tokens = std::min(256, max_tokens);
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (body.contains(key) && !body[key].is_null()) g.max_tokens = static_cast<int>(integer(body, key, 1, max_tokens));
  }
  runtime::SamplerOptions& s = g.sampler;
  s.temperature = 1.0f;  // OpenAI's defaults: plain sampling at temperature 1
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  s.seed = std::random_device{}();
  if (body.contains("temperature") && !body["temperature"].is_null()) s.temperature = static_cast<float>(number(body, "temperature", 0, runtime::kMaxTemperature));
  if (body.contains("top_p") && !body["top_p"].is_null()) s.top_p = static_cast<float>(number(body, "top_p", 0, 1));
  if (body.contains("top_k") && !body["top_k"].is_null()) s.top_k = static_cast<int>(integer(body, "top_k", 0, runtime::kMaxTopK));
  if (body.contains("min_p") && !body["min_p"].is_null()) s.min_p = static_cast<float>(number(body, "min_p", 0, 1));
  if (body.contains("repeat_penalty") && !body["repeat_penalty"].is_null()) s.repeat_penalty = static_cast<float>(number(body, "repeat_penalty", 0, runtime::kMaxRepeatPenalty));
  if (body.contains("seed") && !body["seed"].is_null()) s.seed = static_cast<uint64_t>(integer(body, "seed", INT64_MIN, INT64_MAX));
  if (body.contains("ignore_eos")) g.ignore_eos = boolean(body, "ignore_eos");
  // Chat: logprobs (boolean) and top_logprobs (0-20, with logprobs); completions:
  // logprobs, the number of alternatives (0-5), as OpenAI's legacy endpoint takes it.
  if (chat) {
    const bool want = body.contains("logprobs") && !body["logprobs"].is_null() && boolean(body, "logprobs");
    if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
      if (!want) throw invalid_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
      g.logprobs = static_cast<int>(integer(body, "top_logprobs", 0, runtime::kMaxTopLogprobs));
    } else if (want) {
      g.logprobs = 0;
    }
  } else if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    g.logprobs = static_cast<int>(integer(body, "logprobs", 0, 5));
  }
  if (g.logprobs >= 0 && r.stream) throw invalid_request("'logprobs' is not supported with 'stream'", "logprobs");
  if (body.contains("stop") && !body["stop"].is_null()) {
    const ordered& stop = body["stop"];
    if (stop.is_string()) {
      g.stop = {stop.get<std::string>()};
    } else if (stop.is_array() && stop.size() <= 4 && std::all_of(stop.begin(), stop.end(), [](const ordered& x) { return x.is_string(); })) {
      for (const ordered& x : stop) g.stop.push_back(x.get<std::string>());
    } else {
      throw invalid_request("'stop' must be a string or an array of up to 4 strings", "stop");
    }
    std::erase(g.stop, std::string());
  }
  return r;
}

json logprobs_json(bool chat, const std::vector<runtime::TokenLogprob>& logprobs, const std::function<std::string(int32_t)>& token_text) {
  auto bytes = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(c);
    return b;
  };
  if (chat) {
    json content = json::array();
    for (const runtime::TokenLogprob& t : logprobs) {
      json top = json::array();
      for (const auto& [id, lp] : t.top) {
        const std::string text = token_text(id);
        top.push_back({{"token", text}, {"logprob", lp}, {"bytes", bytes(text)}});
      }
      const std::string text = token_text(t.id);
      content.push_back({{"token", text}, {"logprob", t.logprob}, {"bytes", bytes(text)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), text_offset = json::array();
  size_t offset = 0;
  for (const runtime::TokenLogprob& t : logprobs) {
    const std::string text = token_text(t.id);
    tokens.push_back(text);
    token_logprobs.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[token_text(id)] = lp;
    top_logprobs.push_back(top);
    text_offset.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", text_offset}};
}

json completion_response(const Reply& reply, const std::string& content, const std::string& reasoning, const std::string& finish_reason,
                         int prompt_tokens, int cached_tokens, int completion_tokens, const json& logprobs) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason}};
  if (reply.chat) {
    json message = {{"role", "assistant"}, {"content", content}};
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    choice["message"] = message;
    if (!logprobs.is_null()) choice["logprobs"] = logprobs;
  } else {
    choice["text"] = content;
    choice["logprobs"] = logprobs;
  }
  return {{"id", reply.id},
          {"object", reply.chat ? "chat.completion" : "text_completion"},
          {"created", reply.created},
          {"model", reply.model},
          {"choices", json::array({choice})},
          {"usage", usage(prompt_tokens, cached_tokens, completion_tokens)}};
}

json completion_chunk(const Reply& reply, const json& delta_or_text, const std::string& finish_reason) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason.empty() ? json() : json(finish_reason)}};
  if (reply.chat) {
    choice["delta"] = delta_or_text;
  } else {
    choice["text"] = delta_or_text;
    choice["logprobs"] = nullptr;
  }
  return {{"id", reply.id}, {"object", reply.chat ? "chat.completion.chunk" : "text_completion"}, {"created", reply.created},
          {"model", reply.model}, {"choices", json::array({choice})}};
}

json usage_chunk(const Reply& reply, int prompt_tokens, int cached_tokens, int completion_tokens) {
  return {{"id", reply.id}, {"object", reply.chat ? "chat.completion.chunk" : "text_completion"}, {"created", reply.created},
          {"model", reply.model}, {"choices", json::array()}, {"usage", usage(prompt_tokens, cached_tokens, completion_tokens)}};
}

}  // namespace epq::server
