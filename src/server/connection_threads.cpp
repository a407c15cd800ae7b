#include "server/connection_threads.h"

#include <system_error>
#include <thread>

namespace epq::server {

void ConnectionThreads::enqueue(std::function<void()> connection) {
  std::unique_lock lock(mu_);
  if (running_ >= max_threads_) {
    waiting_.push_back(std::move(connection));
    return;
  }
  try {
    std::thread([this, c = connection]() mutable { serve(std::move(c)); }).detach();
    ++running_;
  } catch (const std::system_error&) {
    // No thread to be had now: a running one takes the connection when it is free; with
    // none running, it is served here, on the accepting thread (only the connection
    // closes its socket, so dropping it would leak the socket and hang the client).
    if (running_ > 0) {
      waiting_.push_back(std::move(connection));
    } else {
      lock.unlock();
      connection();
    }
  }
}

// Runs a connection, then any that wait, and ends the thread when none is left.
void ConnectionThreads::serve(std::function<void()> connection) {
  while (true) {
    connection();
    std::lock_guard lock(mu_);
    if (waiting_.empty()) {
      --running_;
      idle_.notify_all();
      return;  // the lock is released before the thread ends, and nothing touches `this` after
    }
    connection = std::move(waiting_.front());
    waiting_.pop_front();
  }
}

void ConnectionThreads::shutdown() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return running_ == 0 && waiting_.empty(); });
}

}  // namespace epq::server
