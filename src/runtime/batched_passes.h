#pragma once
// Continuous batching: the forward passes of several sequences, each on a thread of its
// own, run together as one step, layer by layer, so that each MoE layer asks the expert
// source once for the union of their experts (a paged expert is read once for all).
//
// A sequence joins (a Membership) before its first pass and leaves after its last. A
// step starts once every member has asked for its pass; passes asked for while a step
// runs wait for the next one. A step takes every one-token (decode) pass, then prompt
// passes (chunks) first come, first served: the chunk of the member that joined first,
// and the next ones while the step's tokens stay within max_step_tokens. The others wait
// for a later step, so that prompts arriving together do not stall the decoding sequences
// for the sum of their lengths, and the first of them is answered first. Within a step the
// members take turns: exactly one runs at a time (so they share the engine's thread
// pool), each until it needs experts. When every unfinished member waits on a layer, the
// union of their requests goes to the source; each batch the source delivers is handed
// to the members that asked for its experts, one after another, before the source is
// asked for more. A member computes exactly what it would alone: the same experts with
// the same calls (the MoE sum never depends on arrival order), so its tokens and logits
// keep their bits whoever else runs.
//
// An exception from the source ends the layer for every member waiting on it: each one's
// next() throws an Error with the same message. A member whose own pass throws leaves
// the step; the others go on.
//
// Matrix products are shared the same way (run_shared_matmuls, core/matmul.h): a member
// that reaches some waits, and when no member can run, the products every waiting member
// asked for run as one parallel loop, where each matrix that several of them multiply
// runs once for all their tokens (gathered into one batch of up to kMaxSharedColumns
// columns, the outputs scattered back): the same attention projection of every
// sequence, or an expert that several sequences chose. Products are served before a
// layer's experts are fetched, and a pass with more than kMaxCols tokens in a product (a
// prompt chunk, whose own tokens fill the kernels' columns) runs it alone at once.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/matmul.h"
#include "models/expert_source.h"
#include "models/model.h"

namespace epq::runtime {

class BatchedPasses {
 public:
  // open(n_tokens, pos0) starts a step of n_tokens in all (pos0: its first member's first
  // position) and gives the source for it; close(n_tokens) ends it. Both run with no pass
  // computing.
  struct StepHooks {
    std::function<models::ExpertSource&(int64_t n_tokens, int32_t pos0)> open;
    std::function<void(int64_t n_tokens)> close;
  };
  // Columns one shared product gathers at most.
  static constexpr int64_t kMaxSharedColumns = 32;
  // Bytes of the gathered columns and their outputs for the model: the memory plan's line.
  static uint64_t shared_products_bytes(const models::ModelInfo& info);

  // max_step_tokens bounds the prompt tokens a step takes on (see the top of this file).
  BatchedPasses(StepHooks hooks, uint64_t shared_products_bytes, int64_t max_step_tokens);

  class Membership {
   public:
    explicit Membership(BatchedPasses& passes);
    ~Membership();
    Membership(const Membership&) = delete;
    Membership& operator=(const Membership&) = delete;

   private:
    BatchedPasses& passes_;
  };

  struct Counts {
    uint64_t steps = 0;         // steps run
    uint64_t passes = 0;        // passes run in them
    uint64_t shared_steps = 0;  // steps of more than one pass
    uint64_t deferred_passes = 0;  // prompt passes left for a later step by max_step_tokens
    uint64_t shared_products = 0;  // matrix products run once for more than one pass
  };
  Counts counts() const;

  // Whether the calling thread holds a Membership.
  static bool joined();
  // Runs pass(source) as the calling member's part of the next step.
  void run(int64_t n_tokens, int32_t pos0, const std::function<void(models::ExpertSource&)>& pass);

 private:
  enum class PassState { kRunnable, kBlocked, kSharing };  // kBlocked: in next(); kSharing: in a shared product
  struct Pass;
  class MemberSource;
  class MemberSharer;

  bool step_can_start() const;
  void start_step();
  // With the lock held, by the thread whose pass just blocked or finished: gives the
  // turn to the next member that can run, serving the source when none can.
  void advance(std::unique_lock<std::mutex>& lock);
  void serve_layer(std::unique_lock<std::mutex>& lock);
  struct SharedProduct;
  // Runs the products the blocked passes wait on, each matrix once for all their tokens.
  void serve_products(std::unique_lock<std::mutex>& lock);
  void run_shared(ThreadPool& pool, const std::vector<SharedProduct>& products);
  // Wakes only the thread of the pass that gets the turn.
  void give_turn(Pass* pass);
  void wait_turn(std::unique_lock<std::mutex>& lock, Pass& pass);
  // With the lock held, by a pass's own thread: it waits in `state` until it has the turn
  // again, and throws the error it was given meanwhile, if any.
  void block(std::unique_lock<std::mutex>& lock, Pass& pass, PassState state);

  StepHooks hooks_;
  mutable std::mutex mu_;
  int members_ = 0;
  uint64_t joins_ = 0;  // members that have joined so far
  std::vector<Pass*> waiting_;  // passes asked for, for the next step
  std::vector<Pass*> step_;     // the running step's passes, in turn order
  const Pass* turn_ = nullptr;  // the pass allowed to run
  models::ExpertSource* source_ = nullptr;  // the running step's
  int64_t step_tokens_ = 0;  // the running step's
  const int64_t max_step_tokens_;
  // The layer being served: its union of experts, and the next layer's predicted ones.
  int layer_ = -1;
  std::vector<int> union_;
  std::vector<int> predicted_;
  int predicted_layer_ = -1;
  std::vector<models::ReadyExpert> batch_;
  Counts counts_;
  // Gathered columns and outputs of a shared product (used with no pass computing).
  const uint64_t gather_limit_;
  std::vector<uint8_t> gathered_act_;
  std::vector<float> gathered_out_;
};

}  // namespace epq::runtime
