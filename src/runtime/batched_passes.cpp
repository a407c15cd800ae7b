#include "runtime/batched_passes.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace epq::runtime {

namespace {
thread_local bool t_joined = false;
}

struct BatchedPasses::Pass {
  enum class State { kRunnable, kBlocked };
  int64_t n_tokens = 0;
  int32_t pos0 = 0;
  State state = State::kRunnable;
  int layer = -1;            // of its last begin()
  std::vector<int> experts;  // what it asked for there
  std::vector<int> own_index;  // per expert of the layer's union: its position in `experts`, or -1
  std::vector<models::ReadyExpert> delivery;  // what its next() returns
  bool layer_done = false;   // next() returns false
  std::string error;         // next() throws
};

// The source one member's pass sees. Its methods run only while that member has the turn.
class BatchedPasses::MemberSource : public models::ExpertSource {
 public:
  MemberSource(BatchedPasses& b, Pass& p) : b_(b), p_(p) {}
  void routed(int layer, std::span<int> experts, std::span<float> weights) override { b_.source_->routed(layer, experts, weights); }
  bool wants_prediction() const override { return b_.source_->wants_prediction(); }
  void predicted(int next_layer, std::span<const int> experts) override {
    std::lock_guard lock(b_.mu_);
    if (b_.predicted_layer_ != next_layer) b_.predicted_.clear();
    b_.predicted_layer_ = next_layer;
    for (int e : experts) {
      if (std::find(b_.predicted_.begin(), b_.predicted_.end(), e) == b_.predicted_.end()) b_.predicted_.push_back(e);
    }
  }
  void begin(int layer, std::span<const int> experts) override {
    std::lock_guard lock(b_.mu_);
    p_.layer = layer;
    p_.experts.assign(experts.begin(), experts.end());
    p_.delivery.clear();
    p_.layer_done = false;
  }
  bool next(std::vector<models::ReadyExpert>& ready) override {
    std::unique_lock lock(b_.mu_);
    ready.clear();
    p_.state = Pass::State::kBlocked;
    b_.advance(lock);
    b_.wait_turn(lock, p_);
    if (!p_.error.empty()) {
      const std::string message = std::move(p_.error);
      p_.error.clear();
      throw Error(message);
    }
    if (p_.layer_done) {
      p_.layer_done = false;
      return false;
    }
    ready.swap(p_.delivery);
    p_.delivery.clear();
    return true;
  }

 private:
  BatchedPasses& b_;
  Pass& p_;
};

BatchedPasses::BatchedPasses(StepHooks hooks) : hooks_(std::move(hooks)) {}

BatchedPasses::Membership::Membership(BatchedPasses& passes) : passes_(passes) {
  if (t_joined) fail("internal: a thread joined the batched passes twice");
  std::lock_guard lock(passes_.mu_);
  ++passes_.members_;
  t_joined = true;
}

BatchedPasses::Membership::~Membership() {
  std::lock_guard lock(passes_.mu_);
  --passes_.members_;
  t_joined = false;
  if (passes_.step_can_start()) passes_.start_step();  // the others were waiting for this one
}

bool BatchedPasses::joined() { return t_joined; }

BatchedPasses::Counts BatchedPasses::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

bool BatchedPasses::step_can_start() const {
  return step_.empty() && !waiting_.empty() && waiting_.size() >= static_cast<size_t>(members_);
}

void BatchedPasses::start_step() {
  step_.swap(waiting_);
  waiting_.clear();
  step_tokens_ = std::accumulate(step_.begin(), step_.end(), int64_t{0}, [](int64_t n, const Pass* p) { return n + p->n_tokens; });
  source_ = &hooks_.open(step_tokens_, step_.front()->pos0);
  ++counts_.steps;
  counts_.passes += step_.size();
  if (step_.size() > 1) ++counts_.shared_steps;
  layer_ = -1;
  predicted_.clear();
  predicted_layer_ = -1;
  turn_ = step_.front();
  cv_.notify_all();
}

void BatchedPasses::wait_turn(std::unique_lock<std::mutex>& lock, const Pass& pass) {
  cv_.wait(lock, [&] { return turn_ == &pass; });
}

void BatchedPasses::advance(std::unique_lock<std::mutex>& lock) {
  turn_ = nullptr;
  for (;;) {
    if (step_.empty()) {  // the step is over
      hooks_.close(step_tokens_);
      source_ = nullptr;
      if (step_can_start()) start_step();
      return;
    }
    for (Pass* p : step_) {
      if (p->state == Pass::State::kRunnable) {
        turn_ = p;
        cv_.notify_all();
        return;
      }
    }
    serve_layer(lock);
  }
}

void BatchedPasses::serve_layer(std::unique_lock<std::mutex>& lock) {
  // Every pass of the step is blocked in next(): serve the lowest layer they wait on
  // (all wait on the same one, as they run the same model).
  int layer = step_.front()->layer;
  for (const Pass* p : step_) layer = std::min(layer, p->layer);
  std::vector<Pass*> asking;
  for (Pass* p : step_) {
    if (p->layer == layer) asking.push_back(p);
  }
  try {
    if (layer_ != layer) {
      // The union in order of first appearance; each pass's experts as union positions.
      union_.clear();
      std::vector<std::vector<size_t>> positions(asking.size());
      for (size_t a = 0; a < asking.size(); ++a) {
        for (int e : asking[a]->experts) {
          const auto at = std::find(union_.begin(), union_.end(), e);
          positions[a].push_back(static_cast<size_t>(at - union_.begin()));
          if (at == union_.end()) union_.push_back(e);
        }
      }
      for (size_t a = 0; a < asking.size(); ++a) {
        asking[a]->own_index.assign(union_.size(), -1);
        for (size_t i = 0; i < positions[a].size(); ++i) asking[a]->own_index[positions[a][i]] = static_cast<int>(i);
      }
      layer_ = layer;
      const std::vector<int> predicted = std::move(predicted_);
      const int predicted_layer = predicted_layer_;
      predicted_.clear();
      predicted_layer_ = -1;
      lock.unlock();  // no pass runs while the source works
      if (!predicted.empty()) source_->predicted(predicted_layer, predicted);
      source_->begin(layer, union_);
      lock.lock();
    }
    lock.unlock();
    const bool more = source_->next(batch_);
    lock.lock();
    if (!more) {
      layer_ = -1;
      for (Pass* p : asking) {
        p->layer_done = true;
        p->state = Pass::State::kRunnable;
      }
      return;
    }
  } catch (const std::exception& e) {
    if (!lock.owns_lock()) lock.lock();
    layer_ = -1;
    for (Pass* p : asking) {
      p->error = e.what();
      p->state = Pass::State::kRunnable;
    }
    return;
  }
  // No pass ran while the source worked, so `asking` is still every pass on this layer.
  for (Pass* p : asking) {
    for (const models::ReadyExpert& r : batch_) {
      const int own = p->own_index[static_cast<size_t>(r.index)];
      if (own >= 0) p->delivery.push_back({own, r.gate, r.up, r.down});
    }
    if (!p->delivery.empty()) p->state = Pass::State::kRunnable;
  }
}

void BatchedPasses::run(int64_t n_tokens, int32_t pos0, const std::function<void(models::ExpertSource&)>& pass) {
  if (!t_joined) fail("internal: a pass run batched by a thread that has not joined");
  Pass p;
  p.n_tokens = n_tokens;
  p.pos0 = pos0;
  MemberSource source(*this, p);
  auto leave_step = [&] {
    std::unique_lock lock(mu_);
    step_.erase(std::find(step_.begin(), step_.end(), &p));
    advance(lock);
  };
  {
    std::unique_lock lock(mu_);
    waiting_.push_back(&p);
    if (step_can_start()) start_step();
    wait_turn(lock, p);
  }
  try {
    pass(source);
  } catch (...) {
    leave_step();
    throw;
  }
  leave_step();
}

}  // namespace epq::runtime
