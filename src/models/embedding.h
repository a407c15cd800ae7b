#pragma once
// The two ends of a language model: token ids to embedding rows, and the final norm
// and output matrix that turn the residual stream into logits. Without output.weight the
// head reuses token_embd (tied embeddings).
#include <cstdint>
#include <span>

#include "core/matrix.h"
#include "models/activations.h"
#include "models/weight_binder.h"

namespace epq::models {

class TokenEmbedding {
 public:
  TokenEmbedding(const WeightBinder& w, int64_t n_embd, int64_t n_vocab);
  // x[t] = the dequantized row of tokens[t]; an id outside the vocabulary is an Error.
  void embed(std::span<const int32_t> tokens, float* x) const;
  const Matrix& table() const { return table_; }

 private:
  Matrix table_;
};

class OutputHead {
 public:
  OutputHead(const WeightBinder& w, const TokenEmbedding& embedding, int64_t n_embd, int64_t n_vocab, float eps);
  // logits[i] = output * rms_norm(x[first + i]) for i < n_tokens (uses act.xn and act.input).
  void logits(ThreadPool& pool, Activations& act, int64_t first, int64_t n_tokens, float* logits) const;

 private:
  Matrix output_;
  const float* norm_;
  float eps_;
};

}  // namespace epq::models
