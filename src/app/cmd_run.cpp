// `epq run`: generate text from a prompt, streaming it to stdout.
#include <fmt/core.h>

#include <cstdio>
#include <fstream>

#include "app/commands.h"
#include "app/engine_flags.h"
#include "runtime/generate.h"
#include "runtime/run_report.h"
#include "util/error.h"
#include "util/format.h"
#include "util/process_memory.h"
#include "util/regular_file.h"

namespace epq::app {
namespace {

struct RunArgs {
  runtime::EngineOptions engine;
  runtime::GenerateOptions gen;
  std::string prompt;
  std::string prompt_file;
  bool no_special = false;
  bool show_prompt = false;
  std::string report_json;
};

void run(RunArgs& a) {
  if (!a.prompt_file.empty()) {
    a.prompt = read_regular_file(a.prompt_file, "prompt file");
  }
  runtime::Engine engine(a.engine);
  runtime::Session session(engine);
  const text::Tokenizer& tok = engine.tokenizer();
  const std::vector<int32_t> prompt = tok.encode_prompt(a.prompt, !a.no_special);
  if (prompt.empty()) fail("the prompt is empty: give one with -p or -f");
  if (a.show_prompt) fmt::print("{}", a.prompt);
  std::fflush(stdout);
  pager::PagerStats after_prompt;
  a.gen.after_prompt = [&] {
    if (engine.pager()) after_prompt = engine.pager()->stats();
  };
  const runtime::GenerateResult r = runtime::generate(session, tok, prompt, a.gen, [](std::string_view piece) {
    fmt::print("{}", piece);
    std::fflush(stdout);
    return true;
  });
  fmt::print("\n");
  std::fflush(stdout);  // the text ends before the report on stderr begins
  const int n_gen = static_cast<int>(r.tokens.size());
  const ProcessMemory mem = read_process_memory();
  fmt::print(stderr,
             "prompt: {} tokens in {:.2f} s ({:.2f} tok/s) | generation: {} tokens in {:.2f} s ({:.2f} tok/s) | finish: {} | "
             "peak RSS {} ({} bytes)\n",
             r.prompt_tokens, r.prompt_seconds, r.prompt_tokens / std::max(r.prompt_seconds, 1e-9), n_gen, r.generation_seconds,
             n_gen > 1 ? (n_gen - 1) / std::max(r.generation_seconds, 1e-9) : 0.0, r.finish_reason, format_bytes(mem.peak_rss),
             mem.peak_rss);
  if (engine.pager()) fmt::print(stderr, "{}\n", engine.pager_summary(session.stats().tokens));
  if (!a.report_json.empty()) {
    std::ofstream out(a.report_json);
    out << runtime::make_run_report(engine, r, after_prompt).to_json().dump(2) << "\n";
    if (!out) fail("cannot write {}", a.report_json);
  }
}

}  // namespace

void add_run_command(CLI::App& root) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* c = root.add_subcommand("run", "Generate text from a prompt");
  add_engine_flags(c, args->engine);
  add_sampler_flags(c, args->gen.sampler);
  c->add_option("-p,--prompt", args->prompt, "Prompt text");
  c->add_option("-f,--file", args->prompt_file, "Read the prompt from a file");
  c->add_option("-n,--n-predict", args->gen.max_tokens, "Tokens to generate")->check(CLI::Range(0, runtime::kMaxGeneratedTokens))->capture_default_str();
  c->add_flag("--ignore-eos", args->gen.ignore_eos, "Keep generating past end-of-generation tokens (fixed-length runs)");
  c->add_option("--stop", args->gen.stop, "Stop when this text is generated (repeatable)");
  c->add_flag("--no-special", args->no_special, "Treat special-token text in the prompt as plain text");
  c->add_flag("--show-prompt", args->show_prompt, "Echo the prompt before the generated text");
  c->add_option("--report-json", args->report_json, "Write the run's measurements (speeds, memory, pager counters) as JSON");
  c->callback([args] { run(*args); });
}

}  // namespace epq::app
