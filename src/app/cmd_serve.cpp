// `epq serve`: an OpenAI-compatible HTTP server and web chat page.
#include "app/commands.h"
#include "app/engine_flags.h"
#include <fstream>
#include <sstream>

#include "server/http_server.h"
#include "util/error.h"

namespace epq::app {
namespace {

struct ServeArgs {
  runtime::EngineOptions engine;
  server::ServerOptions server;
  std::string chat_template_file;
};

// Server threads and request bodies live outside the engine's ledger; they get this much
// of the budget (32 threads' stacks as touched, a few request bodies and responses).
constexpr uint64_t kServerReserve = 64ull << 20;

void run(ServeArgs& a) {
  if (!a.chat_template_file.empty()) {
    std::ifstream in(a.chat_template_file);
    if (!in) fail("cannot read chat template file '{}'", a.chat_template_file);
    std::stringstream text;
    text << in.rdbuf();
    a.server.chat_template = text.str();
  }
  a.engine.reserved_bytes = kServerReserve;
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
  c->add_option("--max-body", args->server.max_body_bytes, "Largest request body in bytes")->capture_default_str();
  c->add_option("--chat-template", args->chat_template_file, "Jinja chat template file to use instead of the model's");
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
