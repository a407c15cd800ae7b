#pragma once
// Requests queue against one loaded model: a single worker thread owns the engine's
// session and runs one generation at a time, in arrival order. Each job streams its text
// through a callback on the worker thread; setting `cancelled` (a client went away)
// stops it at the next token. The session's KV cache is reused when a prompt starts with
// the previous one's tokens. A generation that fails (an I/O error, say) ends its job
// with `error` set and a line on stderr; the session starts the next job afresh.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/session.h"

namespace epq::server {

struct Job {
  std::vector<int32_t> prompt;
  int32_t checkpoint = 0;  // where the conversation before this turn's generation prompt ends (0: none)
  runtime::GenerateOptions options;
  std::function<bool(std::string_view)> on_text;  // worker thread; false cancels
  std::function<void()> on_done;                   // worker thread, when the job ends (optional)
  std::atomic<bool> cancelled{false};

  // Filled by the worker when the job ends.
  runtime::GenerateResult result;
  std::string error;  // set if generation failed

  void wait();
  void mark_done();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

class GenerationQueue {
 public:
  explicit GenerationQueue(runtime::Engine& engine);
  ~GenerationQueue();

  // Queues a job; false if the queue is shutting down.
  bool submit(std::shared_ptr<Job> job);
  size_t depth() const;  // queued + running
  // Stops taking jobs, finishes the queued ones, and joins the worker.
  void drain();

 private:
  void worker();

  runtime::Engine& engine_;
  runtime::Session session_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool running_job_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace epq::server
