// `epq perplexity`: how well a model predicts a text, and position-by-position logit
// comparisons between runs.
#include <fmt/core.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "app/commands.h"
#include "app/engine_flags.h"
#include "runtime/logits_file.h"
#include "runtime/session.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace epq::app {
namespace {

struct PerplexityArgs {
  runtime::EngineOptions engine;
  std::string file;
  std::string token_file;
  int chunks = 0;
  bool all_positions = false;
  std::string logits_out;
  std::string compare;
  bool ctx_given = false;
};

// Running sum of negative log-likelihoods, with the standard error of the mean.
struct NllStats {
  double sum = 0, sum_sq = 0;
  int64_t count = 0;
  void add(double nll) { sum += nll, sum_sq += nll * nll, ++count; }
  double ppl() const { return std::exp(sum / static_cast<double>(count)); }
  double ppl_error() const {
    if (count < 2) return 0;
    const double mean = sum / static_cast<double>(count);
    const double var = sum_sq / static_cast<double>(count) - mean * mean;
    return ppl() * std::sqrt(std::max(var, 0.0) / static_cast<double>(count - 1));
  }
};

double token_nll(const float* logits, int32_t n_vocab, int32_t target) {
  float max = logits[0];
  for (int32_t i = 1; i < n_vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(double{logits[i]} - max);
  return std::log(sum) + max - logits[target];
}

// Token ids stored as int32 little-endian (the layout of llama.cpp's reference files).
std::vector<int32_t> read_token_file(const std::string& path) {
  const std::string bytes = read_regular_file(path, "token file");
  if (bytes.size() % 4 != 0) fail("{}: {} bytes is not a whole number of int32 token ids", path, bytes.size());
  std::vector<int32_t> tokens(bytes.size() / 4);
  std::memcpy(tokens.data(), bytes.data(), bytes.size());
  return tokens;
}

void run(PerplexityArgs& a) {
  // Tokenize before loading the model when the context follows the text's length.
  std::vector<int32_t> tokens;
  if (a.file.empty() == a.token_file.empty()) fail("give the text to score with -f FILE, or its token ids with --token-file FILE");
  if (!a.token_file.empty()) {
    tokens = read_token_file(a.token_file);
  } else {
    const std::string text = read_regular_file(a.file, "text file");
    gguf::File file = gguf::File::open(a.engine.model_path);
    const text::Tokenizer tok = text::Tokenizer::from_gguf(file);
    tokens = tok.encode_prompt(text, false);
  }
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  if (a.all_positions && !a.ctx_given) a.engine.n_ctx = static_cast<int>(n_tokens);
  const int64_t ctx = a.engine.n_ctx;
  if (a.all_positions && n_tokens > ctx) fail("the text has {} tokens but --ctx is {}: raise --ctx or drop --all-positions", n_tokens, ctx);
  if (n_tokens < 2 || (!a.all_positions && n_tokens < ctx)) {
    fail("the text has {} tokens; chunked perplexity needs at least --ctx ({}) tokens", n_tokens, ctx);
  }

  a.engine.all_logits = true;
  runtime::Engine engine(a.engine);
  runtime::Session session(engine);
  const int32_t n_vocab = engine.info().n_vocab;
  std::optional<runtime::LogitsWriter> writer;
  if (!a.logits_out.empty()) writer.emplace(a.logits_out, static_cast<uint32_t>(n_vocab));
  std::optional<runtime::LogitsComparer> comparer;
  if (!a.compare.empty()) {
    comparer.emplace(runtime::read_logits_file(a.compare));
    if (comparer->n_vocab() != static_cast<uint32_t>(n_vocab)) {
      fail("{} has {} logits per position but the model has {}", a.compare, comparer->n_vocab(), n_vocab);
    }
  }

  const int64_t n_chunks_all = a.all_positions ? 1 : n_tokens / ctx;
  const int64_t n_chunks = a.chunks > 0 ? std::min<int64_t>(a.chunks, n_chunks_all) : n_chunks_all;
  const int64_t chunk_len = a.all_positions ? n_tokens : ctx;
  const int64_t first = a.all_positions ? 0 : ctx / 2;  // first scored position in a chunk
  fmt::print(stderr, "perplexity: {} tokens, {} chunk(s) of {}, scoring positions {}..{} of each\n", n_tokens, n_chunks, chunk_len,
             first, chunk_len - 2);
  NllStats stats;
  size_t scored = 0;
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * chunk_len, tokens.begin() + (c + 1) * chunk_len);
    if (c > 0 && engine.tokenizer().add_bos() && engine.tokenizer().bos()) chunk[0] = *engine.tokenizer().bos();
    session.truncate(0);
    session.eval_each(chunk, [&](size_t j, const float* row) {
      if (static_cast<int64_t>(j) < first || static_cast<int64_t>(j) >= chunk_len - 1) return;
      const int32_t target = chunk[j + 1];
      stats.add(token_nll(row, n_vocab, target));
      if (writer) writer->add(target, row);
      if (comparer) comparer->add(scored, target, row);
      ++scored;
    });
    fmt::print("[{}]{:.4f}{}", c + 1, stats.ppl(), c + 1 == n_chunks ? "\n" : ",");
    std::fflush(stdout);
  }
  const auto& st = session.stats();
  fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f} over {} positions ({:.2f} tok/s)\n", stats.ppl(), stats.ppl_error(), stats.count,
             static_cast<double>(st.tokens) / std::max(st.seconds, 1e-9));
  if (engine.pager()) fmt::print(stderr, "{}\n", engine.pager_summary(st.tokens));
  if (writer) {
    writer->finish();
    fmt::print("wrote the logits of {} positions to {}\n", scored, a.logits_out);
  }
  if (comparer) {
    if (scored != comparer->size()) fail("this run scored {} positions but {} holds {}", scored, a.compare, comparer->size());
    const runtime::LogitsComparison r = comparer->result();
    fmt::print("compared with {}: {} positions, mean KL {:.6g}, max KL {:.6g}, top-1 agreement {:.2f}%, max |dlogit| {:.6g}, "
               "PPL {:.4f} (reference) vs {:.4f} (this run)\n",
               a.compare, r.positions, r.mean_kl, r.max_kl, 100 * r.top1_agreement, r.max_abs_diff, r.ppl_reference, r.ppl_this);
  }
}

}  // namespace

void add_perplexity_command(CLI::App& root) {
  auto args = std::make_shared<PerplexityArgs>();
  CLI::App* c = root.add_subcommand("perplexity", "Measure perplexity on a text file; save or compare logits");
  add_engine_flags(c, args->engine);
  CLI::Option* file = c->add_option("-f,--file", args->file, "Text file");
  CLI::Option* token_file = c->add_option("--token-file", args->token_file,
                                          "Score these token ids instead of a text: int32 little-endian, as llama.cpp's tools write them");
  file->excludes(token_file);
  c->add_option("--chunks", args->chunks, "Score at most this many chunks (0: all)");
  c->add_flag("--all-positions", args->all_positions,
              "Teacher-forced NLL over the whole file as one sequence: score every position (--ctx defaults to the text's length)");
  c->add_option("--logits-out", args->logits_out, "Write the logits of every scored position to this file");
  c->add_option("--compare", args->compare, "Compare this run's logits with a file written by --logits-out");
  c->preparse_callback([args](size_t) { args->ctx_given = false; });
  c->callback([args, c] {
    args->ctx_given = c->get_option("--ctx")->count() > 0;
    run(*args);
  });
}

}  // namespace epq::app
