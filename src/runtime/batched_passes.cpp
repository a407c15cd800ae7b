#include "runtime/batched_passes.h"

#include <algorithm>
#include <cstring>

#include "quant/dot.h"
#include "util/error.h"

namespace epq::runtime {

namespace {
thread_local bool t_joined = false;
thread_local uint64_t t_arrival = 0;  // the calling member's place in the order of joining

// Whether two products read the same matrix with activations of the same layout.
bool same_matrix(const MatmulJob& a, const MatmulJob& b) {
  const Matrix &x = *a.w, &y = *b.w;
  return x.data == y.data && x.type == y.type && x.rows == y.rows && x.cols == y.cols && x.row_bytes == y.row_bytes && x.rows4 == y.rows4 &&
         a.act_stride == b.act_stride;
}
}  // namespace

struct BatchedPasses::Pass {
  int64_t n_tokens = 0;
  int32_t pos0 = 0;
  uint64_t arrival = 0;  // its member's t_arrival
  PassState state = PassState::kRunnable;
  int layer = -1;            // of its last begin()
  std::vector<int> experts;  // what it asked for there
  std::vector<int> own_index;  // per expert of the layer's union: its position in `experts`, or -1
  std::vector<models::ReadyExpert> delivery;  // what its next() returns
  bool layer_done = false;   // next() returns false
  std::string error;         // next() or a shared product throws
  std::span<const MatmulJob> products;  // kSharing: what it waits on
  ThreadPool* pool = nullptr;
  std::condition_variable turn;  // notified when it gets the turn (only its thread waits on it)
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
    b_.block(lock, p_, PassState::kBlocked);
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

// The products one member's pass shares. Runs only while that member has the turn.
class BatchedPasses::MemberSharer : public MatmulSharer {
 public:
  MemberSharer(BatchedPasses& b, Pass& p) : b_(b), p_(p) {}
  void run(ThreadPool& pool, std::span<const MatmulJob> jobs) override {
    const bool wide = std::any_of(jobs.begin(), jobs.end(), [](const MatmulJob& j) { return j.n_tokens > quant::kMaxCols; });
    std::unique_lock lock(b_.mu_);
    if (b_.step_.size() == 1 || wide) {  // nobody to share with, or columns enough of its own
      lock.unlock();
      run_matmuls(pool, jobs);
      return;
    }
    p_.products = jobs;
    p_.pool = &pool;
    b_.block(lock, p_, PassState::kSharing);
  }

 private:
  BatchedPasses& b_;
  Pass& p_;
};

uint64_t BatchedPasses::shared_products_bytes(const models::ModelInfo& info) {
  // Outputs of up to n_vocab rows (the output head, the widest product) and activations
  // of up to 4 n_embd floats (any activation format is smaller) per column.
  return static_cast<uint64_t>(kMaxSharedColumns) * sizeof(float) * (static_cast<uint64_t>(info.n_vocab) + 4 * static_cast<uint64_t>(info.n_embd));
}

BatchedPasses::BatchedPasses(StepHooks hooks, uint64_t shared_products_bytes, int64_t max_step_tokens)
    : hooks_(std::move(hooks)), max_step_tokens_(max_step_tokens), gather_limit_(shared_products_bytes) {}

BatchedPasses::Membership::Membership(BatchedPasses& passes) : passes_(passes) {
  if (t_joined) fail("internal: a thread joined the batched passes twice");
  std::lock_guard lock(passes_.mu_);
  ++passes_.members_;
  t_joined = true;
  t_arrival = ++passes_.joins_;
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
  // Every one-token pass; then the prompt passes in the order their members joined (first
  // come, first served: a prompt goes on to its last chunk before the next one starts), the
  // first of them always and the later ones while the step stays within max_step_tokens_.
  // The rest wait for the next step.
  std::vector<Pass*> prompts;
  int64_t tokens = 0;
  for (Pass* p : waiting_) {
    if (p->n_tokens == 1) {
      step_.push_back(p);
      ++tokens;
    } else {
      prompts.push_back(p);
    }
  }
  std::sort(prompts.begin(), prompts.end(), [](const Pass* a, const Pass* b) { return a->arrival < b->arrival; });
  waiting_.clear();
  for (Pass* p : prompts) {
    if (p == prompts.front() || tokens + p->n_tokens <= max_step_tokens_) {
      step_.push_back(p);
      tokens += p->n_tokens;
    } else {
      waiting_.push_back(p);
    }
  }
  counts_.deferred_passes += waiting_.size();
  step_tokens_ = tokens;
  source_ = &hooks_.open(step_tokens_, step_.front()->pos0);
  ++counts_.steps;
  counts_.passes += step_.size();
  if (step_.size() > 1) ++counts_.shared_steps;
  layer_ = -1;
  predicted_.clear();
  predicted_layer_ = -1;
  give_turn(step_.front());
}

void BatchedPasses::give_turn(Pass* pass) {
  turn_ = pass;
  pass->turn.notify_one();
}

void BatchedPasses::wait_turn(std::unique_lock<std::mutex>& lock, Pass& pass) {
  pass.turn.wait(lock, [&] { return turn_ == &pass; });
}

void BatchedPasses::block(std::unique_lock<std::mutex>& lock, Pass& pass, PassState state) {
  pass.state = state;
  advance(lock);
  wait_turn(lock, pass);
  if (!pass.error.empty()) {
    const std::string message = std::move(pass.error);
    pass.error.clear();
    throw Error(message);
  }
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
      if (p->state == PassState::kRunnable) {
        give_turn(p);
        return;
      }
    }
    const bool sharing = std::any_of(step_.begin(), step_.end(), [](const Pass* p) { return p->state == PassState::kSharing; });
    if (sharing) {
      serve_products(lock);
    } else {
      serve_layer(lock);
    }
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
        p->state = PassState::kRunnable;
      }
      return;
    }
  } catch (const std::exception& e) {
    if (!lock.owns_lock()) lock.lock();
    layer_ = -1;
    for (Pass* p : asking) {
      p->error = e.what();
      p->state = PassState::kRunnable;
    }
    return;
  }
  // No pass ran while the source worked, so `asking` is still every pass on this layer.
  for (Pass* p : asking) {
    for (const models::ReadyExpert& r : batch_) {
      const int own = p->own_index[static_cast<size_t>(r.index)];
      if (own >= 0) p->delivery.push_back({own, r.gate, r.up, r.down});
    }
    if (!p->delivery.empty()) p->state = PassState::kRunnable;
  }
}

// One matrix's product for the passes that asked for it: their jobs, in turn order.
struct BatchedPasses::SharedProduct {
  std::vector<const MatmulJob*> parts;
  int64_t columns = 0;
  // Its gathered activations and outputs; a single part runs in place and gathers none.
  bool gathered() const { return parts.size() > 1; }
  uint64_t act_bytes() const { return gathered() ? static_cast<uint64_t>(columns) * parts.front()->act_stride : 0; }
  uint64_t out_floats() const { return gathered() ? static_cast<uint64_t>(columns) * static_cast<uint64_t>(parts.front()->w->rows) : 0; }
};

void BatchedPasses::serve_products(std::unique_lock<std::mutex>& lock) {
  // Every waiting pass whose products still fit the gather buffers beside the others'
  // (the rest are served next time round), each matrix once.
  std::vector<SharedProduct> products;
  std::vector<Pass*> served;
  for (Pass* p : step_) {
    if (p->state != PassState::kSharing) continue;
    std::vector<SharedProduct> with = products;
    for (const MatmulJob& job : p->products) {
      auto it = std::find_if(with.begin(), with.end(), [&](const SharedProduct& s) { return same_matrix(*s.parts.front(), job); });
      if (it == with.end()) it = with.insert(with.end(), SharedProduct{});
      it->parts.push_back(&job);
      it->columns += job.n_tokens;
    }
    uint64_t with_bytes = 0;
    bool fits = true;
    for (const SharedProduct& s : with) {
      with_bytes += s.act_bytes() + s.out_floats() * sizeof(float);
      fits = fits && (!s.gathered() || s.columns <= kMaxSharedColumns);
    }
    if (!served.empty() && (!fits || with_bytes > gather_limit_)) continue;
    products = std::move(with);
    served.push_back(p);
  }
  ThreadPool& pool = *served.front()->pool;
  lock.unlock();  // no pass runs while the products do
  std::string error;
  try {
    if (served.size() == 1) {
      run_matmuls(pool, served.front()->products);
    } else {
      run_shared(pool, products);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  lock.lock();
  for (const SharedProduct& s : products) counts_.shared_products += s.gathered();
  for (Pass* p : served) {
    p->error = error;
    p->products = {};
    p->state = PassState::kRunnable;
  }
}

void BatchedPasses::run_shared(ThreadPool& pool, const std::vector<SharedProduct>& products) {
  uint64_t act_bytes = 0, out_floats = 0;
  for (const SharedProduct& s : products) act_bytes += s.act_bytes(), out_floats += s.out_floats();
  if (gathered_act_.size() < act_bytes) gathered_act_.resize(act_bytes);
  if (gathered_out_.size() < out_floats) gathered_out_.resize(out_floats);
  // A matrix of several parts: their tokens' activation rows side by side as its columns.
  std::vector<MatmulJob> jobs;
  uint8_t* act = gathered_act_.data();
  float* out = gathered_out_.data();
  for (const SharedProduct& s : products) {
    const MatmulJob& first = *s.parts.front();
    if (!s.gathered()) {
      jobs.push_back(first);
      continue;
    }
    const size_t rows = static_cast<size_t>(first.w->rows);
    jobs.push_back({first.w, act, first.act_stride, s.columns, out, rows});
    for (const MatmulJob* part : s.parts) {
      std::memcpy(act, part->act, static_cast<size_t>(part->n_tokens) * first.act_stride);
      act += static_cast<size_t>(part->n_tokens) * first.act_stride;
    }
    out += static_cast<size_t>(s.columns) * rows;
  }
  run_matmuls(pool, jobs);
  for (size_t i = 0; i < products.size(); ++i) {
    if (!products[i].gathered()) continue;
    const size_t rows = static_cast<size_t>(jobs[i].w->rows);
    const float* column = jobs[i].out;
    for (const MatmulJob* part : products[i].parts) {
      for (int64_t t = 0; t < part->n_tokens; ++t, column += rows) {
        std::memcpy(part->out + static_cast<size_t>(t) * part->out_stride, column, rows * sizeof(float));
      }
    }
  }
}

void BatchedPasses::run(int64_t n_tokens, int32_t pos0, const std::function<void(models::ExpertSource&)>& pass) {
  if (!t_joined) fail("internal: a pass run batched by a thread that has not joined");
  Pass p;
  p.n_tokens = n_tokens;
  p.pos0 = pos0;
  p.arrival = t_arrival;
  MemberSource source(*this, p);
  MemberSharer sharer(*this, p);
  const SharingMatmuls sharing(&sharer);
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
