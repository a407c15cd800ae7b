#pragma once
// What every architecture shares, so that its file holds only its hyperparameters, its
// blocks and its layer loop:
//   BatchState     a state's batch limits and residual stream (blocks add their state)
//   ModelBase      hyperparameters, shape, bound weights, embedding and output head, and
//                  building (or measuring) the architecture's State
//   forward_frame  the pass around the layers: check the batch, record positions, embed
//                  the tokens, then write the logits of the last token (or of all) and the
//                  pass's timing
// Hparams must provide n_embd, n_vocab and rms_eps; State(alloc, hparams, n_ctx,
// max_tokens, n_threads) must take all its memory from alloc.
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

#include "models/activations.h"
#include "models/embedding.h"
#include "models/model.h"
#include "models/state_allocator.h"
#include "models/weight_binder.h"
#include "util/error.h"

namespace epq::models {

// A state's batch limits and the residual stream; architectures add their blocks' state.
class BatchState : public ForwardState {
 public:
  BatchState(StateAllocator& alloc, int n_ctx, int batch, int n_embd) : ctx(n_ctx), max_tokens(batch), act(alloc, batch, n_embd) {}
  int n_ctx() const override { return ctx; }

  int ctx, max_tokens;
  Activations act;
};

template <typename Hparams, typename State>
class ModelBase : public Model {
 public:
  const ModelInfo& info() const override { return info_; }

  std::unique_ptr<ForwardState> new_state(int n_ctx, int max_tokens, int n_threads) const override {
    StateAllocator alloc = StateAllocator::allocating();
    return std::make_unique<State>(alloc, h_, n_ctx, max_tokens, n_threads);
  }

  // Bytes new_state would allocate, without allocating them.
  static uint64_t state_bytes(const Hparams& h, int n_ctx, int max_tokens, int n_threads) {
    StateAllocator alloc = StateAllocator::measuring();
    State(alloc, h, n_ctx, max_tokens, n_threads);
    return alloc.bytes();
  }

 protected:
  ModelBase(const gguf::File& f, const ResidentWeights& weights, Hparams h, ModelInfo info)
      : h_(std::move(h)), info_(std::move(info)), w_(f, weights), embedding_(w_, h_.n_embd, h_.n_vocab),
        output_(w_, embedding_, h_.n_embd, h_.n_vocab, h_.rms_eps) {}

  Hparams h_;
  ModelInfo info_;
  WeightBinder w_;
  TokenEmbedding embedding_;
  OutputHead output_;
};

// Runs layers(n_tokens) between the embedding and the output head.
template <typename Layers>
void forward_frame(BatchState& s, const TokenEmbedding& embedding, const OutputHead& head, ThreadPool& pool,
                   std::span<const int32_t> tokens, int32_t pos0, bool all_logits, float* logits, ForwardTiming* timing,
                   Layers&& layers) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T == 0) return;
  if (T > s.max_tokens) fail("internal: batch of {} tokens exceeds the state's {}", T, s.max_tokens);
  if (pos0 < 0 || pos0 + T > s.ctx) fail("context is full: {} positions needed, --ctx is {}", pos0 + T, s.ctx);
  if (timing) *timing = {};
  s.act.positions.resize(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) s.act.positions[static_cast<size_t>(t)] = pos0 + static_cast<int32_t>(t);
  embedding.embed(tokens, s.act.x.as<float>());
  layers(T);
  const int64_t first = all_logits ? 0 : T - 1;
  head.logits(pool, s.act, first, T - first, logits);
  if (timing) timing->total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace epq::models
