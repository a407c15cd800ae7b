// `epq serve`: an OpenAI-compatible HTTP server and web chat page.
#include <cctype>
#include <cstdlib>
#include <optional>

#include "app/commands.h"
#include "app/engine_flags.h"

#include "server/access_policy.h"
#include "server/http_server.h"
#include "text/chat_template.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace epq::app {
namespace {

struct ServeArgs {
  runtime::EngineOptions engine;
  server::ServerOptions server;
  std::string chat_template_file;
  std::optional<std::string> api_key;  // --api-key
  std::string api_key_file;
  std::vector<std::string> cors_origins;
};

// The API key from --api-key-file, --api-key or EPQ_API_KEY, in that order; empty for none.
std::string resolve_api_key(const ServeArgs& a) {
  std::string key, source;
  if (!a.api_key_file.empty()) {
    key = read_regular_file(a.api_key_file, "API key file", 64 << 10);
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
    source = "--api-key-file " + a.api_key_file;
  } else if (a.api_key) {
    key = *a.api_key, source = "--api-key";
  } else if (const char* env = std::getenv("EPQ_API_KEY")) {
    key = env, source = "EPQ_API_KEY";
  } else {
    return "";
  }
  server::check_api_key(key, source);
  return key;
}

void run(ServeArgs& a) {
  a.server.api_key = resolve_api_key(a);
  a.server.cors_origins = server::parse_cors_origins(a.cors_origins);
  if (!a.chat_template_file.empty()) {
    a.server.chat_template = read_regular_file(a.chat_template_file, "chat template file", text::ChatTemplate::kMaxSourceBytes);
  }
  a.engine.reserved_bytes = server::server_reserve_bytes(a.server);
  a.engine.n_sequences = a.server.parallel;  // the memory plan holds every sequence's state
  server::block_shutdown_signals();
  runtime::Engine engine(a.engine);
  server::serve(engine, a.server);
}

}  // namespace

void add_serve_command(CLI::App& root) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* c = root.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API, with a web chat page at /");
  add_engine_flags(c, args->engine);
  c->add_option("--host", args->server.host, "Address to listen on (without an API key, anything but loopback gets a warning)")
      ->capture_default_str();
  c->add_option("--port", args->server.port, "Port to listen on")->check(CLI::Range(1, 65535))->capture_default_str();
  c->add_option("--alias", args->server.model_id, "Model id clients use (default: the file name without .gguf, and a split model's without -00001-of-N)");
  c->add_option_function<std::string>(
       "--max-body", [args](const std::string& v) { args->server.max_body_bytes = runtime::parse_budget(v, "--max-body"); },
       "Largest request body (e.g. 1M); the memory plan reserves what preparing one costs (default 1M)");
  c->add_option("--max-tokens", args->server.max_tokens, "The most tokens a request may ask to generate (more: 400)")
      ->check(CLI::Range(1, runtime::kMaxGeneratedTokens))
      ->capture_default_str();
  c->add_option("--parallel", args->server.parallel,
                "Generations decoding together, one forward pass for all (each paged expert read once per step for every "
                "sequence); each has its own KV cache, counted in the memory plan; more requests wait in the queue")
      ->check(CLI::Range(1, runtime::kMaxParallel))
      ->capture_default_str();
  c->add_option("--max-connections", args->server.max_connections, "Connections served at once, each on its own thread; more wait")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  c->add_option("--max-connections-per-address", args->server.max_connections_per_address,
                "Connections one client address may hold at once, 0 for no limit (more: 429, and the connection is closed); "
                "behind a proxy every client has the proxy's address")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  c->add_option("--timeout", args->server.read_timeout_seconds,
                "Seconds a client may stay silent while sending a request or reading a reply, or idle between requests")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  c->add_option("--request-timeout", args->server.request_timeout_seconds,
                "Seconds a request's line, headers and body may take to arrive in all, counted from the connection's start "
                "or its previous reply, however steadily they trickle in (more: 408, and the connection is closed)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  c->add_option("--reply-timeout", args->server.reply_timeout_seconds,
                "Seconds a reply may wait in all for the client to read it, however steadily it reads a little now "
                "and then; the time spent generating is not counted (more: the connection is reset)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  c->add_option("--chat-template", args->chat_template_file, "Jinja chat template file to use instead of the model's");
  auto* key = c->add_option_function<std::string>(
      "--api-key", [args](const std::string& v) { args->api_key = v; },
      "Require 'Authorization: Bearer KEY' on every route but / and /health (or EPQ_API_KEY; "
                            "--api-key-file keeps it out of the process list)");
  c->add_option("--api-key-file", args->api_key_file, "Read the API key from this file (one line)")->excludes(key);
  c->add_option("--cors-origin", args->cors_origins,
                "Let pages from this origin (scheme://host[:port], or *) call the API; repeat it or give a comma list")
      ->take_all();
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
