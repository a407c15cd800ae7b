#pragma once
// `epq serve`: an OpenAI-compatible HTTP server around one loaded model.
//   POST /v1/chat/completions, POST /v1/completions (streaming as Server-Sent Events)
//   GET /v1/models, GET /health, GET /metrics (Prometheus), GET / (a web chat page)
// Requests queue against the model (GenerationQueue); bad input gets an OpenAI-style
// error object with a 4xx status, and the server stays up.
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "runtime/engine.h"

namespace epq::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string model_id;  // name clients use; default: the file name without .gguf
  size_t max_body_bytes = 8 << 20;
  int http_threads = 32;
  std::optional<std::string> chat_template;  // replaces the model's template (its source text)
};

// Blocks SIGTERM and SIGINT in this thread and every thread started after it, so that
// serve() can wait for them. Call it before creating the engine (whose threads inherit it).
void block_shutdown_signals();

// Serves until SIGTERM or SIGINT, then finishes queued requests and returns.
void serve(runtime::Engine& engine, const ServerOptions& options);

}  // namespace epq::server
