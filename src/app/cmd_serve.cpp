// `epq serve`: an OpenAI-compatible HTTP server and web chat page.
#include "app/commands.h"
#include "app/engine_flags.h"

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
};

void run(ServeArgs& a) {
  if (!a.chat_template_file.empty()) {
    a.server.chat_template = read_regular_file(a.chat_template_file, "chat template file", text::ChatTemplate::kMaxSourceBytes);
  }
  a.engine.reserved_bytes = server::server_reserve_bytes(a.server);
  server::block_shutdown_signals();
  runtime::Engine engine(a.engine);
  server::serve(engine, a.server);
}

}  // namespace

void add_serve_command(CLI::App& root) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* c = root.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API, with a web chat page at /");
  add_engine_flags(c, args->engine);
  c->add_option("--host", args->server.host, "Address to listen on")->capture_default_str();
  c->add_option("--port", args->server.port, "Port to listen on")->check(CLI::Range(1, 65535))->capture_default_str();
  c->add_option("--alias", args->server.model_id, "Model id clients use (default: the file name without .gguf)");
  c->add_option_function<std::string>(
       "--max-body", [args](const std::string& v) { args->server.max_body_bytes = runtime::parse_budget(v, "--max-body"); },
       "Largest request body (e.g. 1M); the memory plan reserves what preparing one costs (default 1M)");
  c->add_option("--max-connections", args->server.max_connections, "Connections served at once, each on its own thread; more wait")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  c->add_option("--timeout", args->server.read_timeout_seconds, "Seconds a client may stay silent while sending a request, or idle between requests")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  c->add_option("--chat-template", args->chat_template_file, "Jinja chat template file to use instead of the model's");
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
