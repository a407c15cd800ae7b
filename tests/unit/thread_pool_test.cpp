// The thread pool (core/thread_pool.h): every task runs once, and a thread whose share is
// done takes the others' tasks from the back of their shares.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "util/error.h"

namespace epq {
namespace {

TEST(ThreadPool, RunsEveryTaskOnceForAnyCountOfTasksAndThreads) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 3, 5, 7, 64, 1001}) {
      for (int round = 0; round < 3; ++round) {  // the same pool again: the shares are set anew
        std::unique_ptr<std::atomic<int>[]> runs(new std::atomic<int>[static_cast<size_t>(n) + 1]());
        std::atomic<bool> bad_thread{false};
        pool.run(n, [&](int64_t task, int thread) {
          runs[static_cast<size_t>(task)].fetch_add(1);
          if (thread < 0 || thread >= threads) bad_thread = true;
        });
        for (int64_t t = 0; t < n; ++t) EXPECT_EQ(runs[static_cast<size_t>(t)].load(), 1) << threads << " threads, " << n << " tasks, task " << t;
        EXPECT_FALSE(bad_thread);
      }
    }
  }
}

// Runs that follow each other faster than the workers wake (four threads on this
// machine's cores): a worker still waking from one run finds it done and takes part in a
// later one. Each task must run once, with the functor of its own run.
TEST(ThreadPool, RunChunksCoversEveryItemOnceInPiecesOfAtMostTheChunk) {
  ThreadPool pool(2);
  for (int64_t n : {0, 1, 31, 32, 33, 1000}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    std::atomic<bool> too_long{false};
    pool.run_chunks(n, 32, [&](int64_t begin, int64_t end, int) {
      if (end - begin > 32 || end <= begin) too_long = true;
      for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)]++;
    });
    EXPECT_FALSE(too_long) << "n = " << n;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "n = " << n << ", item " << i;
  }
}

TEST(ThreadPool, AWorkerThatWakesLateTakesPartOnlyInTheRunStillGoing) {
  ThreadPool pool(4);
  constexpr int kRuns = 200000;
  std::vector<std::atomic<int>> ran(16);
  ThreadPool::Task functors[2];  // consecutive runs' functors live apart, so a stale one shows
  int wrong = 0;
  for (int run = 0; run < kRuns && wrong == 0; ++run) {
    const int64_t n = 2 + run % 15;
    for (int64_t t = 0; t < n; ++t) ran[static_cast<size_t>(t)].store(-1);
    ThreadPool::Task& functor = functors[run % 2];
    functor = [&ran, run](int64_t task, int) { ran[static_cast<size_t>(task)].store(run); };
    pool.run(n, functor);
    for (int64_t t = 0; t < n; ++t) wrong += ran[static_cast<size_t>(t)].load() != run;
  }
  EXPECT_EQ(wrong, 0);
}

// Two threads, eight tasks: the caller's share is 0-3, the worker's 4-7. Task 0 holds the
// caller until every other task has run, so the worker runs them all: its own share from
// the front, then the caller's from the back.
TEST(ThreadPool, AThiefTakesTheOtherSharesFromTheBack) {
  ThreadPool pool(2);
  std::mutex mutex;
  std::vector<int64_t> order;
  std::atomic<int> others_done{0};
  bool waited_too_long = false;
  pool.run(8, [&](int64_t task, int thread) {
    if (task == 0) {
      EXPECT_EQ(thread, 0);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (others_done.load() < 7) {
        if (std::chrono::steady_clock::now() > deadline) {
          waited_too_long = true;
          break;
        }
      }
    } else {
      EXPECT_EQ(thread, 1);
      std::lock_guard<std::mutex> lock(mutex);
      order.push_back(task);
      others_done.fetch_add(1);
    }
  });
  ASSERT_FALSE(waited_too_long);
  EXPECT_EQ(order, (std::vector<int64_t>{4, 5, 6, 7, 3, 2, 1}));
}

TEST(ThreadPool, RefusesMoreTasksThanASharesRangeHolds) {
  ThreadPool pool(2);
  bool ran = false;
  EXPECT_THROW(pool.run(int64_t{1} << 32, [&](int64_t, int) { ran = true; }), Error);
  EXPECT_FALSE(ran);
  std::atomic<int64_t> sum{0};
  pool.run(3, [&](int64_t task, int) { sum.fetch_add(task); });
  EXPECT_EQ(sum.load(), 3);  // the pool still works
}

}  // namespace
}  // namespace epq
