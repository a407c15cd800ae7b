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

GenerationQueue::GenerationQueue(runtime::Engine& engine) : engine_(engine), session_(engine), thread_([this] { worker(); }) {}

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
  return queue_.size() + (running_job_ ? 1 : 0);
}

void GenerationQueue::drain() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GenerationQueue::worker() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to do
      job = std::move(queue_.front());
      queue_.pop_front();
      running_job_ = true;
    }
    if (!job->cancelled) {
      try {
        const std::span<const int32_t> fresh = session_.reuse_prefix(job->prompt);
        session_.add_checkpoint(job->checkpoint);
        job->result = runtime::generate(session_, engine_.tokenizer(), fresh, job->options, [&](std::string_view piece) {
          return !job->cancelled && job->on_text(piece);
        });
        job->result.prompt_tokens = static_cast<int>(job->prompt.size());
        job->result.cached_tokens = static_cast<int>(job->prompt.size() - fresh.size());
      } catch (const std::exception& e) {  // an I/O error, say: this request fails, the next starts afresh
        job->error = e.what();
        fmt::print(stderr, "epq serve: a request failed: {}\n", job->error);
        session_.truncate(0);
      }
    }
    try {
      if (job->on_done) job->on_done();
    } catch (const std::exception& e) {  // out of memory building the last chunks: the stream still ends
      job->error = e.what();
    }
    {
      std::lock_guard lock(mu_);
      running_job_ = false;
    }
    job->mark_done();
  }
}

}  // namespace epq::server
