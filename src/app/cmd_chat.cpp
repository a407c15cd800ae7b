// `epq chat`: an interactive conversation in the terminal, in the model's chat format
// (its own Jinja template, or ChatML when it has none).
#include <unistd.h>

#include <fmt/core.h>

#include <iostream>
#include <limits>

#include "app/commands.h"
#include "app/engine_flags.h"
#include "runtime/conversation_checkpoint.h"
#include "runtime/generate.h"
#include "text/chat_template.h"
#include "util/error.h"

namespace epq::app {
namespace {

// A message is one line of at most kMaxLineBytes (the server's default --max-body).
constexpr size_t kMaxLineBytes = 1 << 20;

// The next line into `line`; false at the end of input. A longer line is skipped whole
// and comes back empty, with *too_long set.
bool read_line(std::istream& in, std::string& line, bool* too_long) {
  line.clear();
  *too_long = false;
  for (int c; (c = in.get()) != std::char_traits<char>::eof();) {
    if (c == '\n') return true;
    if (line.size() == kMaxLineBytes) {
      in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
      line.clear();
      *too_long = true;
      return true;
    }
    line.push_back(static_cast<char>(c));
  }
  return !line.empty();
}

struct ChatArgs {
  runtime::EngineOptions engine;
  runtime::GenerateOptions gen;
  std::string system;
};

void run(ChatArgs& a) {
  runtime::Engine engine(a.engine);
  runtime::Session session(engine);
  const text::Tokenizer& tok = engine.tokenizer();
  const text::ChatTemplate chat_template(engine.file(), tok);
  const bool interactive = isatty(STDIN_FILENO) != 0;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
  if (interactive) fmt::print(stderr, "epq chat: {} - type a message; /reset starts over, /exit or Ctrl-D quits\n", engine.info().name);
  std::string line;
  for (;;) {
    if (interactive) fmt::print(stderr, "> ");
    bool too_long = false;
    if (!read_line(std::cin, line, &too_long) || line == "/exit") break;
    if (too_long) fmt::print(stderr, "epq chat: a message is longer than {} bytes; it was not sent\n", kMaxLineBytes);
    if (line == "/reset") {
      messages.erase(messages.begin() + (a.system.empty() ? 0 : 1), messages.end());
      session.truncate(0);
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    // Re-render the conversation; evaluate only what the session does not hold yet.
    const std::vector<int32_t> ids = tok.encode_prompt(chat_template.render(messages, nullptr, true), true);
    if (static_cast<int64_t>(ids.size()) >= session.n_ctx()) {
      // Keep the conversation so far; the user decides whether to start over.
      fmt::print(stderr, "epq chat: the conversation would be {} tokens, more than --ctx {} holds; /reset starts over\n", ids.size(),
                 session.n_ctx());
      messages.erase(messages.end() - 1);
      continue;
    }
    const std::span<const int32_t> fresh = session.reuse_prefix(ids);
    if (engine.info().recurrent_bytes > 0) {
      session.add_checkpoint(runtime::conversation_checkpoint(chat_template, tok, messages, nullptr, nlohmann::ordered_json::object(), ids));
    }
    const auto r = runtime::generate(session, tok, fresh, a.gen, [](std::string_view piece) {
      fmt::print("{}", piece);
      std::fflush(stdout);
      return true;
    });
    fmt::print("\n");
    messages.push_back({{"role", "assistant"}, {"content", r.text}});
    if (interactive) {
      fmt::print(stderr, "[{} tokens, {:.2f} tok/s]\n", r.tokens.size(),
                 r.tokens.size() > 1 ? static_cast<double>(r.tokens.size() - 1) / std::max(r.generation_seconds, 1e-9) : 0.0);
    }
  }
}

}  // namespace

void add_chat_command(CLI::App& root) {
  auto args = std::make_shared<ChatArgs>();
  args->gen.max_tokens = 512;
  CLI::App* c = root.add_subcommand("chat", "Chat with a model in the terminal (one message per line)");
  add_engine_flags(c, args->engine);
  add_sampler_flags(c, args->gen.sampler);
  c->add_option("-n,--n-predict", args->gen.max_tokens, "Longest reply in tokens")->check(CLI::Range(0, runtime::kMaxGeneratedTokens))->capture_default_str();
  c->add_option("--system", args->system, "System message");
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
