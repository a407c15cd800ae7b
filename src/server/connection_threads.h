#pragma once
// httplib's task queue for `epq serve`: every connection gets a thread of its own, up to
// a limit, so that slow or idle clients (each holding its connection until the read
// timeout or the request timeout, server/guarded_server.h) cannot starve the rest:
// /health still answers while dozens of clients trickle their requests in. Past the
// limit, connections wait in arrival order. When no thread can be started at all, a new
// connection is served on the accepting thread.
#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

namespace epq::server {

class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(int max_threads) : max_threads_(max_threads) {}
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> connection) override;
  // Waits for every connection, running and waiting, to finish.
  void shutdown() override;

 private:
  void serve(std::function<void()> connection);

  const int max_threads_;
  int running_ = 0;
  std::deque<std::function<void()>> waiting_;
  std::mutex mu_;
  std::condition_variable idle_;
};

}  // namespace epq::server
