#include "models/embedding.h"

#include "core/matmul.h"
#include "core/ops.h"
#include "quant/reference.h"
#include "util/error.h"

namespace epq::models {

TokenEmbedding::TokenEmbedding(const WeightBinder& w, int64_t n_embd, int64_t n_vocab)
    : table_(w.matrix("token_embd.weight", n_embd, n_vocab)) {}

void TokenEmbedding::embed(std::span<const int32_t> tokens, float* x) const {
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int32_t id = tokens[t];
    if (id < 0 || id >= table_.rows) fail("token id {} is out of range (vocabulary has {} tokens)", id, table_.rows);
    quant::dequantize_row(table_.type, table_.row(id), x + static_cast<int64_t>(t) * table_.cols, table_.cols);
  }
}

OutputHead::OutputHead(const WeightBinder& w, const TokenEmbedding& embedding, int64_t n_embd, int64_t n_vocab, float eps)
    : output_(w.has("output.weight") ? w.matrix("output.weight", n_embd, n_vocab) : embedding.table()),
      norm_(w.vector("output_norm.weight", n_embd)),
      eps_(eps) {}

void OutputHead::logits(ThreadPool& pool, Activations& act, int64_t first, int64_t n_tokens, float* logits) const {
  const int64_t E = act.n_embd;
  float* xn = act.xn.as<float>();
  for (int64_t t = 0; t < n_tokens; ++t) ops::rms_norm(act.x.as<float>() + (first + t) * E, norm_, eps_, E, xn + t * E);
  act.input.set(pool, xn, n_tokens, E, static_cast<size_t>(E));
  const MatmulJob job[] = {matmul_job(output_, act.input, logits, static_cast<size_t>(output_.rows))};
  run_shared_matmuls(pool, job);
}

}  // namespace epq::models
