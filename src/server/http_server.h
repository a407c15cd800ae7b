#pragma once
// `epq serve`: an OpenAI-compatible HTTP server around one loaded model.
//   POST /v1/chat/completions, POST /v1/completions (streaming as Server-Sent Events)
//   GET /v1/models, GET /health, GET /metrics (Prometheus), GET / (a web chat page)
// Who may use it (API key, allowed origins, JSON bodies only) is server/access_policy.h.
// Requests queue against the model (GenerationQueue); bad input gets an OpenAI-style
// error object with a 4xx status, and the server stays up.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/sampler.h"

namespace epq::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string model_id;  // name clients use; default: the file name without .gguf
  size_t max_body_bytes = 1 << 20;
  int max_tokens = runtime::kMaxGeneratedTokens;  // the most tokens one request may ask for (more: 400)
  int parallel = 1;              // generations decoding together (continuous batching); more requests wait in the queue
  int max_connections = 64;      // connections served at once, each on its own thread; more wait
  int max_connections_per_address = 0;  // connections one client address may hold at once (0: no limit); more get 429
  int read_timeout_seconds = 10;  // a client silent this long while sending, not reading a reply, or idle is dropped
  int request_timeout_seconds = 30;  // the most the server waits for one request's line, headers and body in all (408)
  int reply_timeout_seconds = 30;    // the most a reply waits for its client to read it, in all (then the connection ends)
  std::optional<std::string> chat_template;  // replaces the model's template (its source text)
  std::string api_key;                       // empty: no key needed
  std::vector<std::string> cors_origins;     // origins other pages may call from (see access_policy.h)
};

// What a request may cost while it is read, parsed, rendered and tokenized: a fixed part
// and a multiple of its body (measured worst cases: docs/SERVER.md "Limits").
inline constexpr uint64_t kRequestFixedBytes = 4 << 20;
inline constexpr uint64_t kRequestBytesPerBodyByte = 48;
inline constexpr uint64_t request_bytes(uint64_t body_bytes) { return kRequestFixedBytes + body_bytes * kRequestBytesPerBodyByte; }
// Stack and buffers a connection's thread touches (estimated from httplib's buffers and
// the handlers' deepest recursion, the Jinja evaluator's).
inline constexpr uint64_t kConnectionBytes = 256 << 10;

// The budget the server needs beside the engine: every connection's thread, one request
// of --max-body being prepared, responses and the server's own tables.
uint64_t server_reserve_bytes(const ServerOptions& options);

// Blocks SIGTERM and SIGINT in this thread and every thread started after it, so that
// serve() can wait for them. Call it before creating the engine (whose threads inherit it).
void block_shutdown_signals();

// Serves until SIGTERM or SIGINT, then finishes queued requests and returns.
void serve(runtime::Engine& engine, const ServerOptions& options);

}  // namespace epq::server
