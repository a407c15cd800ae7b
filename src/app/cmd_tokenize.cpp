// `epq tokenize`: the token ids (and pieces) of a text under a model's tokenizer.
#include <fmt/core.h>

#include "app/commands.h"
#include "gguf/file.h"
#include "text/tokenizer.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace epq::app {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string prompt;
  std::string file;
  bool has_prompt = false;
  bool pieces = false;
  bool no_special = false;
  bool add_bos = false;
};

void run(const TokenizeArgs& a) {
  gguf::File file = gguf::File::open(a.model);
  const text::Tokenizer tok = text::Tokenizer::from_gguf(file);
  if (a.has_prompt == !a.file.empty()) fail("give the text with -p TEXT or -f FILE");
  const std::string text = a.file.empty() ? a.prompt : read_regular_file(a.file, "text file");
  std::vector<int32_t> ids = a.add_bos ? tok.encode_prompt(text, !a.no_special) : tok.encode(text, !a.no_special);
  if (!a.pieces) {
    for (size_t i = 0; i < ids.size(); ++i) fmt::print("{}{}", i ? " " : "", ids[i]);
    fmt::print("\n");
    return;
  }
  for (int32_t id : ids) {
    std::string shown;
    for (char c : tok.token_text(id, true)) {
      if (c == '\n') shown += "\\n";
      else if (c == '\t') shown += "\\t";
      else shown += c;
    }
    fmt::print("{:>7} '{}'\n", id, shown);
  }
}

}  // namespace

void add_tokenize_command(CLI::App& root) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* c = root.add_subcommand("tokenize", "Print the token ids of a text");
  c->add_option("-m,--model", args->model, "GGUF model file")->required();
  CLI::Option* prompt = c->add_option("-p,--prompt", args->prompt, "Text to tokenize");
  c->add_option("-f,--file", args->file, "File whose text to tokenize")->excludes(prompt);
  c->add_flag("--pieces", args->pieces, "Print each token's id and text, one per line");
  c->add_flag("--no-special", args->no_special, "Treat special-token text as plain text");
  c->add_flag("--add-bos", args->add_bos, "Encode as a prompt: with the BOS token if the model asks for one");
  c->callback([args, prompt] {
    args->has_prompt = prompt->count() > 0;
    run(*args);
  });
}

}  // namespace epq::app
