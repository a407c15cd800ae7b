#include "pager/pread_engine.h"

#include <unistd.h>

#include <cerrno>

#include "util/error.h"

namespace epq::pager {

PreadEngine::PreadEngine(const ShardFiles& files, int queue_depth) : files_(files) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStackBytes);
  const int n = std::max(1, std::min(kThreads, queue_depth));
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, &attr, &PreadEngine::thread_main, this) != 0) {
      pthread_attr_destroy(&attr);
      stop_threads();
      fail("cannot start I/O thread");
    }
    threads_.push_back(t);
  }
  pthread_attr_destroy(&attr);
}

PreadEngine::~PreadEngine() { stop_threads(); }

void PreadEngine::stop_threads() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (pthread_t t : threads_) pthread_join(t, nullptr);
  threads_.clear();
}

void* PreadEngine::thread_main(void* self) {
  static_cast<PreadEngine*>(self)->worker();
  return nullptr;
}

void PreadEngine::worker() {
  for (;;) {
    ReadRequest r;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      r = queue_.front();
      queue_.pop_front();
    }
    int64_t result;
    do {
      result = ::pread(files_[r.shard].fd(), r.dest, r.length, static_cast<off_t>(r.offset));
    } while (result < 0 && errno == EINTR);
    if (result < 0) result = -errno;
    {
      std::lock_guard lock(mu_);
      done_.push_back({r.tag, result});
      --pending_;
    }
    done_cv_.notify_one();
  }
}

void PreadEngine::submit(std::span<const ReadRequest> reads) {
  {
    std::lock_guard lock(mu_);
    queue_.insert(queue_.end(), reads.begin(), reads.end());
    pending_ += reads.size();
  }
  work_cv_.notify_all();
}

void PreadEngine::reap(std::vector<ReadCompletion>& out, bool wait) {
  std::unique_lock lock(mu_);
  if (wait) done_cv_.wait(lock, [&] { return !done_.empty() || pending_ == 0; });
  out.insert(out.end(), done_.begin(), done_.end());
  done_.clear();
}

size_t PreadEngine::in_flight() const {
  std::lock_guard lock(mu_);
  return pending_ + done_.size();
}

}  // namespace epq::pager
