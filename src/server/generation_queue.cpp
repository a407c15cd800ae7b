#include "server/generation_queue.h"

#include <fmt/core.h>

#include <algorithm>

#include "util/error.h"

namespace epq::server {

void Job::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_; });
}

void Job::mark_done() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

GenerationQueue::GenerationQueue(runtime::Engine& engine, int parallel) : engine_(engine) {
  if (parallel < 1) fail("internal: a generation queue of {} workers", parallel);
  for (int i = 0; i < parallel; ++i) workers_.push_back(std::make_unique<Worker>(engine));
  for (auto& w : workers_) w->thread = std::thread([this, w = w.get()] { work(*w); });
}

GenerationQueue::~GenerationQueue() { drain(); }

bool GenerationQueue::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return true;
}

size_t GenerationQueue::depth() const {
  std::lock_guard lock(mu_);
  return queue_.size() + running_;
}

size_t GenerationQueue::running() const {
  std::lock_guard lock(mu_);
  return running_;
}

void GenerationQueue::drain() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

const GenerationQueue::Worker* GenerationQueue::best_worker() const {
  const std::vector<int32_t>& prompt = queue_.front()->prompt;
  const Worker* best = nullptr;
  size_t best_common = 0;
  for (const auto& w : workers_) {
    if (w->busy) continue;
    const std::vector<int32_t>& held = w->session.tokens();
    const size_t common = static_cast<size_t>(std::mismatch(held.begin(), held.end(), prompt.begin(), prompt.end()).first - held.begin());
    if (!best || common > best_common) best = w.get(), best_common = common;
  }
  return best;
}

void GenerationQueue::work(Worker& worker) {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return (stopping_ && queue_.empty()) || (!queue_.empty() && best_worker() == &worker); });
      if (queue_.empty()) return;  // stopping, and nothing left to do
      job = std::move(queue_.front());
      queue_.pop_front();
      worker.busy = true;
      ++running_;
    }
    cv_.notify_all();  // the next job, if any, goes to another free worker
    if (!job->cancelled) {
      runtime::Session& session = worker.session;
      try {
        // From here to the end of the generation, this worker's passes run batched with the others'.
        const runtime::BatchedPasses::Membership batched(engine_.batched_passes());
        const std::span<const int32_t> fresh = session.reuse_prefix(job->prompt);
        session.add_checkpoint(job->checkpoint);
        job->result = runtime::generate(session, engine_.tokenizer(), fresh, job->options, [&](std::string_view piece) {
          return !job->cancelled && job->on_text(piece);
        });
        job->result.prompt_tokens = static_cast<int>(job->prompt.size());
        job->result.cached_tokens = static_cast<int>(job->prompt.size() - fresh.size());
      } catch (const std::exception& e) {  // an I/O error, say: this request fails, the next starts afresh
        job->error = e.what();
        fmt::print(stderr, "epq serve: a request failed: {}\n", job->error);
        session.truncate(0);
      }
    }
    try {
      if (job->on_done) job->on_done();
    } catch (const std::exception& e) {  // out of memory building the last chunks: the stream still ends
      job->error = e.what();
    }
    {
      std::lock_guard lock(mu_);
      worker.busy = false;
      --running_;
    }
    cv_.notify_all();  // this worker's session may suit a queued job best
    job->mark_done();
  }
}

}  // namespace epq::server
