#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>

#include <immintrin.h>

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "util/error.h"

namespace epq {
namespace {

constexpr int kSpinIterations = 20000;  // some tens of microseconds of polling before sleeping

struct StartArgs {
  ThreadPool* pool;
  int thread;
};

}  // namespace

void* ThreadPool::thread_main(void* arg) {
  auto* a = static_cast<StartArgs*>(arg);
  ThreadPool* pool = a->pool;
  int thread = a->thread;
  delete a;
  pool->worker_loop(thread);
  return nullptr;
}

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads), shares_(std::make_unique<Share[]>(static_cast<size_t>(n_threads_))) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kWorkerStackBytes);
  for (int t = 1; t < n_threads_; ++t) {
    auto* args = new StartArgs{this, t};
    pthread_t id;
    int rc = pthread_create(&id, &attr, &ThreadPool::thread_main, args);
    if (rc != 0) {
      delete args;
      pthread_attr_destroy(&attr);
      stop_workers();
      fail("cannot start worker thread {}: error {}", t, rc);
    }
    workers_.push_back(id);
  }
  pthread_attr_destroy(&attr);
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (pthread_t id : workers_) pthread_join(id, nullptr);
  workers_.clear();
}

bool ThreadPool::take(Share& share, bool from_back, int64_t& task) {
  uint64_t range = share.range.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t front = range & 0xFFFFFFFFu, back = range >> 32;
    if (front >= back) return false;
    const uint64_t taken = from_back ? front | (back - 1) << 32 : (front + 1) | back << 32;
    // Acquire: a task taken from a run's share sees that run's task_ (stored before the share).
    if (share.range.compare_exchange_weak(range, taken, std::memory_order_acquire, std::memory_order_relaxed)) {
      task = static_cast<int64_t>(from_back ? back - 1 : front);
      return true;
    }
  }
}

// The thread's own share from its front, then the others' from their backs.
// Counts the tasks it ran once, at the end: the run they belong to cannot end before.
void ThreadPool::drain(int thread) {
  int64_t done = 0;
  for (int k = 0; k < n_threads_; ++k) {
    Share& share = shares_[static_cast<size_t>((thread + k) % n_threads_)];
    int64_t task;
    for (; take(share, k != 0, task); ++done) (*task_)(task, thread);
  }
  if (done != 0) done_tasks_.fetch_add(done, std::memory_order_release);
}

void ThreadPool::worker_loop(int thread) {
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen) {
      if (++spins < kSpinIterations) {
        _mm_pause();
      } else {
        // seq_cst on both sides: either run() sees this worker asleep and wakes it, or
        // wait() sees the new generation and returns at once.
        sleeping_workers_.fetch_add(1);
        generation_.wait(seen);
        sleeping_workers_.fetch_sub(1);
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    drain(thread);
  }
}

void ThreadPool::run(int64_t n_tasks, const Task& task) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t i = 0; i < n_tasks; ++i) task(i, 0);
    return;
  }
  if (n_tasks > int64_t{0xFFFFFFFF}) fail("{} tasks in one parallel loop: at most 4294967295", n_tasks);
  // The previous run's tasks are all done and its shares empty, so no thread touches
  // task_ or done_tasks_ until it takes a task from the shares stored below (release).
  task_ = &task;
  done_tasks_.store(0, std::memory_order_relaxed);
  for (int t = 0; t < n_threads_; ++t) {
    const auto front = static_cast<uint64_t>(n_tasks * t / n_threads_), back = static_cast<uint64_t>(n_tasks * (t + 1) / n_threads_);
    shares_[static_cast<size_t>(t)].range.store(front | back << 32, std::memory_order_release);
  }
  generation_.fetch_add(1);
  if (sleeping_workers_.load() != 0) generation_.notify_all();
  drain(0);
  // Waits for the tasks, not for the workers: a worker that has not woken yet (another
  // process holds its core) finds the shares empty when it does, and holds nothing up.
  // A task a descheduled worker is running is waited for, yielding the core after a while
  // in case that worker waits for it.
  for (int spins = 0; done_tasks_.load(std::memory_order_acquire) != n_tasks;) {
    if (++spins < kSpinIterations) {
      _mm_pause();
    } else {
      sched_yield();
    }
  }
}

void ThreadPool::run_chunks(int64_t n, int64_t chunk, const std::function<void(int64_t begin, int64_t end, int thread)>& fn) {
  run((n + chunk - 1) / chunk, [&](int64_t piece, int thread) { fn(piece * chunk, std::min(n, (piece + 1) * chunk), thread); });
}

int physical_core_count() {
  std::set<std::string> cores;
  for (unsigned cpu = 0;; ++cpu) {
    std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core(base + "core_id"), package(base + "physical_package_id");
    std::string c, p;
    if (!(core >> c) || !(package >> p)) break;
    cores.insert(p + ":" + c);
  }
  if (!cores.empty()) return std::min(static_cast<int>(cores.size()), usable_cpu_count());
  return usable_cpu_count();
}

int usable_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace epq
