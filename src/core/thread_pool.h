#pragma once
// A persistent pool of worker threads for data-parallel loops. run() hands tasks
// [0, n_tasks) to the workers and the calling thread, and returns when all are done.
// Threads are created once; between runs workers spin briefly, then sleep on a futex.
// run() returns when every task is done, whether or not each worker took part: on a
// machine whose cores other processes also use, a worker that is not scheduled in time
// has its share taken by the others instead of stalling the run.
// Each thread owns a contiguous share of the tasks and takes them from its front; a
// thread whose share is done takes tasks from the back of the others' shares, so that a
// slow thread does not hold up the run. Neighbouring tasks (e.g. row chunks of one matrix)
// thus stay with one thread, and a thief works far from the owner: two cores reading
// alternate chunks of one stream read it slower than each reading its own part
// (docs/PERFORMANCE.md). Which thread runs which task is still not fixed, so a task must
// only write its own outputs: then results do not depend on scheduling. A task must not
// throw: the other threads may still be running the run's tasks.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <pthread.h>

#include <vector>

namespace epq {

class ThreadPool {
 public:
  using Task = std::function<void(int64_t task, int thread)>;

  explicit ThreadPool(int n_threads);  // n_threads counts the calling thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  void run(int64_t n_tasks, const Task& task);
  // run() over [0, n) in pieces of up to `chunk` items: fn(begin, end, thread) for each.
  // One piece (n <= chunk) runs on the calling thread, as run() does one task.
  void run_chunks(int64_t n, int64_t chunk, const std::function<void(int64_t begin, int64_t end, int thread)>& fn);

  // Stack size of each worker thread; the memory ledger counts it.
  static constexpr size_t kWorkerStackBytes = 1 << 20;

 private:
  static void* thread_main(void* arg);
  void worker_loop(int thread);
  void stop_workers();
  void drain(int thread);

  // Thread t's share of the run's tasks, [front, back) packed as front | back << 32 so
  // that the owner (front) and thieves (back) agree through one compare-and-swap.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
  };
  static bool take(Share& share, bool from_back, int64_t& task);

  int n_threads_;
  std::vector<pthread_t> workers_;
  const Task* task_ = nullptr;
  std::unique_ptr<Share[]> shares_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int64_t> done_tasks_{0};  // tasks of the current run that have finished
  std::atomic<int> sleeping_workers_{0};  // workers in generation_.wait(): only then is a wake-up syscall needed
  std::atomic<bool> stop_{false};
};

// Physical cores of this machine (hyper-threads not counted), at least 1 and at most
// usable_cpu_count().
int physical_core_count();
// CPUs this process may run on (its affinity mask), at least 1.
int usable_cpu_count();

}  // namespace epq
