#pragma once
// IoEngine on a few threads that each run blocking pread calls.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "pager/io_engine.h"

namespace epq::pager {

class PreadEngine : public IoEngine {
 public:
  static constexpr int kThreads = 4;
  static constexpr size_t kStackBytes = 256 << 10;

  PreadEngine(const ShardFiles& files, int queue_depth);
  ~PreadEngine() override;
  const char* name() const override { return "pread"; }
  void submit(std::span<const ReadRequest> reads) override;
  void reap(std::vector<ReadCompletion>& out, bool wait) override;
  size_t in_flight() const override;

 private:
  static void* thread_main(void* self);
  void worker();
  void stop_threads();

  const ShardFiles& files_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<ReadRequest> queue_;
  std::vector<ReadCompletion> done_;
  size_t pending_ = 0;  // queued + running
  bool stop_ = false;
  std::vector<pthread_t> threads_;
};

}  // namespace epq::pager
