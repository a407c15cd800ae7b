#pragma once
// Requests queue against one loaded model. Up to `parallel` generations run at once, each
// on a worker thread that owns a session (its KV cache or recurrent state) and samples on
// its own; their forward passes run together, one step for all (continuous batching,
// runtime/batched_passes.h), so a paged expert is read once per step for every sequence.
// A job joins at the next step once a worker is free, and leaves when it ends; jobs start
// in arrival order, each on the free worker whose session holds the longest prefix of its
// prompt (that KV cache is reused). Each job streams its text through a callback on its
// worker thread; setting `cancelled` (a client went away) stops it at the next token. A
// generation that fails (an I/O error, say) ends its job with `error` set and a line on
// stderr; that worker's session starts the next job afresh.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

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
  GenerationQueue(runtime::Engine& engine, int parallel);
  ~GenerationQueue();

  // Queues a job; false if the queue is shutting down.
  bool submit(std::shared_ptr<Job> job);
  size_t depth() const;    // queued + running
  size_t running() const;  // generations running now
  // Stops taking jobs, finishes the queued ones, and joins the workers.
  void drain();

 private:
  struct Worker {
    explicit Worker(runtime::Engine& engine) : session(engine) {}
    runtime::Session session;  // touched only by its thread while busy, read by others only while idle
    bool busy = false;
    std::thread thread;
  };
  void work(Worker& worker);
  // The idle worker for the front job: the one whose session holds most of its prompt.
  const Worker* best_worker() const;

  runtime::Engine& engine_;
  std::vector<std::unique_ptr<Worker>> workers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  size_t running_ = 0;
  bool stopping_ = false;
};

}  // namespace epq::server
