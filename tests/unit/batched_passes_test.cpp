// BatchedPasses: members' passes run as one step; each MoE layer reaches the source once,
// as the union of the members' requests, and every member gets exactly its own experts,
// under its own indices; a source error fails every member waiting on that layer.
#include "runtime/batched_passes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/matmul.h"
#include "core/quantized_input.h"
#include "core/thread_pool.h"
#include "quant/dot.h"
#include "quant/reference.h"
#include "util/error.h"

namespace epq::runtime {
namespace {

// Delivers a layer's experts two at a time; remembers every begin().
class FakeSource : public models::ExpertSource {
 public:
  void begin(int layer, std::span<const int> experts) override {
    if (layer == fail_at) throw Error("read failed");
    begins.push_back({layer, std::vector<int>(experts.begin(), experts.end())});
    pending_ = begins.back().second;
    next_ = 0;
  }
  bool next(std::vector<models::ReadyExpert>& ready) override {
    ready.clear();
    for (int i = 0; i < 2 && next_ < pending_.size(); ++i, ++next_) {
      ready.push_back({static_cast<int>(next_), {}, {}, {}});
      ready.back().gate.rows = pending_[next_];  // stands for the expert's weights
    }
    return !ready.empty();
  }
  std::vector<std::pair<int, std::vector<int>>> begins;
  std::atomic<int> fail_at{-1};

 private:
  std::vector<int> pending_;
  size_t next_ = 0;
};

// Member m asks, at layer l, for experts {l, 10 + m, 20 + m + l}; returns what it got.
std::vector<std::set<int>> member_pass(models::ExpertSource& source, int m, int n_layers) {
  std::vector<std::set<int>> got(static_cast<size_t>(n_layers));
  for (int l = 0; l < n_layers; ++l) {
    const std::vector<int> want = {l, 10 + m, 20 + m + l};
    source.begin(l, want);
    std::vector<models::ReadyExpert> ready;
    while (source.next(ready)) {
      for (const auto& r : ready) {
        EXPECT_EQ(r.gate.rows, want[static_cast<size_t>(r.index)]) << "member " << m << " layer " << l;
        got[static_cast<size_t>(l)].insert(static_cast<int>(r.gate.rows));
      }
    }
  }
  return got;
}

// Runs body(m) on a thread of its own for each of n members, once all have joined (in
// the order of m).
template <typename Body>
void run_members(BatchedPasses& passes, int n, Body body) {
  std::atomic<int> joined{0};
  std::vector<std::thread> threads;
  for (int m = 0; m < n; ++m) {
    threads.emplace_back([&, m] {
      while (joined < m) std::this_thread::yield();
      BatchedPasses::Membership member(passes);
      ++joined;
      while (joined < n) std::this_thread::yield();  // all join before the first pass
      body(m);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(BatchedPasses, MembersShareEachLayerAndGetTheirOwnExperts) {
  FakeSource source;
  int opened = 0, closed = 0;
  int64_t step_tokens = 0;
  BatchedPasses passes({[&](int64_t n, int32_t) -> models::ExpertSource& {
                          ++opened;
                          step_tokens = n;
                          return source;
                        },
                        [&](int64_t) { ++closed; }},
                       0, 256);
  constexpr int kMembers = 3, kLayers = 4;
  std::vector<std::vector<std::set<int>>> got(kMembers);
  run_members(passes, kMembers, [&](int m) {
    passes.run(m + 1, 0, [&](models::ExpertSource& s) { got[static_cast<size_t>(m)] = member_pass(s, m, kLayers); });
  });
  EXPECT_EQ(opened, 1);
  EXPECT_EQ(closed, 1);
  EXPECT_EQ(step_tokens, 1 + 2 + 3);
  ASSERT_EQ(source.begins.size(), static_cast<size_t>(kLayers));  // one request per layer for all
  for (int l = 0; l < kLayers; ++l) {
    const auto& [layer, experts] = source.begins[static_cast<size_t>(l)];
    EXPECT_EQ(layer, l);
    std::set<int> want;
    for (int m = 0; m < kMembers; ++m) want.insert({l, 10 + m, 20 + m + l});
    EXPECT_EQ(std::set<int>(experts.begin(), experts.end()), want);
    EXPECT_EQ(experts.size(), want.size()) << "the union has no duplicates";
    for (int m = 0; m < kMembers; ++m) {
      EXPECT_EQ(got[static_cast<size_t>(m)][static_cast<size_t>(l)], (std::set<int>{l, 10 + m, 20 + m + l}));
    }
  }
  EXPECT_EQ(passes.counts().shared_steps, 1u);
  EXPECT_EQ(passes.counts().passes, static_cast<uint64_t>(kMembers));
}

// One member decodes (three one-token passes) while two prompts of 10 tokens ask at once:
// a step takes every decode pass and the first prompt, and a later prompt only within
// the step's token limit, else it waits for the next step.
TEST(BatchedPasses, AStepTakesPromptsWithinItsTokenLimit) {
  for (const auto& [limit, want] : {std::pair{int64_t{12}, std::vector<int64_t>{11, 11, 1}},
                                    std::pair{int64_t{4}, std::vector<int64_t>{11, 11, 1}},
                                    std::pair{int64_t{21}, std::vector<int64_t>{21, 1, 1}}}) {
    FakeSource source;
    std::vector<int64_t> steps;
    BatchedPasses passes({[&](int64_t n, int32_t) -> models::ExpertSource& {
                            steps.push_back(n);
                            return source;
                          },
                          [](int64_t) {}},
                         0, limit);
    run_members(passes, 3, [&](int m) {
      for (int i = 0; i < (m == 0 ? 3 : 1); ++i) {
        passes.run(m == 0 ? 1 : 10, 0, [&](models::ExpertSource& s) { member_pass(s, m, 1); });
      }
    });
    EXPECT_EQ(steps, want) << "limit " << limit;
  }
}

// Prompts are served first come, first served: of two prompts of two chunks each, the
// one whose member joined first runs both its chunks before the other starts, while a
// third member decodes in every step.
TEST(BatchedPasses, PromptsRunInTheOrderTheirMembersJoined) {
  FakeSource source;
  std::mutex mu;
  int step = 0;
  std::vector<std::vector<int>> steps_of(3);  // member -> the steps its passes ran in
  BatchedPasses passes({[&](int64_t, int32_t) -> models::ExpertSource& {
                          ++step;
                          return source;
                        },
                        [](int64_t) {}},
                       0, 12);
  run_members(passes, 3, [&](int m) {
    for (int i = 0; i < (m == 2 ? 4 : 2); ++i) {
      passes.run(m == 2 ? 1 : 10, 0, [&](models::ExpertSource& s) {
        {
          std::lock_guard lock(mu);
          steps_of[static_cast<size_t>(m)].push_back(step);
        }
        member_pass(s, m, 1);
      });
    }
  });
  EXPECT_EQ(steps_of[0], (std::vector<int>{1, 2}));
  EXPECT_EQ(steps_of[1], (std::vector<int>{3, 4}));
  EXPECT_EQ(steps_of[2], (std::vector<int>{1, 2, 3, 4}));
}

TEST(BatchedPasses, ASourceErrorFailsEveryMemberOfTheLayer) {
  FakeSource source;
  source.fail_at = 2;
  BatchedPasses passes({[&](int64_t, int32_t) -> models::ExpertSource& { return source; }, [](int64_t) {}}, 0, 256);
  constexpr int kMembers = 2;
  std::atomic<int> failed{0};
  std::mutex mu;
  std::vector<std::string> messages;
  run_members(passes, kMembers, [&](int m) {
    try {
      passes.run(1, 0, [&](models::ExpertSource& s) { member_pass(s, m, 4); });
    } catch (const Error& e) {
      ++failed;
      std::lock_guard lock(mu);
      messages.push_back(e.what());
    }
    // The member goes on: its next pass (another step) works.
    source.fail_at = -1;
    passes.run(1, 0, [&](models::ExpertSource& s) { member_pass(s, m, 1); });
  });
  EXPECT_EQ(failed, kMembers);
  for (const std::string& m : messages) EXPECT_EQ(m, "read failed");
}

TEST(BatchedPasses, AMemberAloneRunsAtOnce) {
  FakeSource source;
  BatchedPasses passes({[&](int64_t, int32_t) -> models::ExpertSource& { return source; }, [](int64_t) {}}, 0, 256);
  BatchedPasses::Membership member(passes);
  EXPECT_TRUE(BatchedPasses::joined());
  for (int i = 0; i < 3; ++i) passes.run(1, i, [&](models::ExpertSource& s) { member_pass(s, 0, 2); });
  EXPECT_EQ(passes.counts().steps, 3u);
  EXPECT_EQ(passes.counts().shared_steps, 0u);
  EXPECT_EQ(source.begins.size(), 6u);
}

// A Q4_K matrix of `rows` x 256 with weights from `seed`.
struct TestMatrix {
  std::vector<uint8_t> bytes;
  Matrix m;
  TestMatrix(int64_t rows, int seed) {
    m.type = quant::Type::Q4_K;
    m.rows = rows;
    m.cols = 256;
    m.row_bytes = quant::row_bytes(m.type, m.cols);
    bytes.resize(static_cast<size_t>(rows) * m.row_bytes);
    std::vector<float> row(256);
    for (int64_t r = 0; r < rows; ++r) {
      for (int i = 0; i < 256; ++i) row[static_cast<size_t>(i)] = static_cast<float>(((r * 131 + i * 17 + seed * 7) % 41) - 20) / 13.0f;
      quant::quantize_row(m.type, row.data(), bytes.data() + static_cast<size_t>(r) * m.row_bytes, 256);
    }
    m.data = bytes.data();
  }
};

// Member m's products: `w` times its own activations (tokens rows, from m and the matrix's seed).
std::vector<float> product(ThreadPool& pool, const Matrix& w, int m, int64_t tokens, bool shared) {
  std::vector<float> x(static_cast<size_t>(tokens) * 256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((static_cast<int>(i) * 29 + m * 11 + static_cast<int>(w.rows)) % 23 - 11) / 7.0f;
  QuantizedInput input(tokens, 256);
  input.set(pool, x.data(), tokens, 256, 256);
  std::vector<float> out(static_cast<size_t>(tokens * w.rows));
  const MatmulJob job[] = {matmul_job(w, input, out.data(), static_cast<size_t>(w.rows))};
  if (shared) {
    run_shared_matmuls(pool, job);
  } else {
    run_matmuls(pool, job);
  }
  return out;
}

TEST(BatchedPasses, MembersShareProductsOfTheSameMatricesAndKeepTheirBits) {
  FakeSource source;
  BatchedPasses passes({[&](int64_t, int32_t) -> models::ExpertSource& { return source; }, [](int64_t) {}}, 1 << 20, 256);
  ThreadPool pool(2);
  const TestMatrix first(40, 1), extra(24, 2), last(56, 3);
  // Member m has m + 1 tokens; member 0 alone has an extra product between the shared two,
  // and member 2's tokens exceed kMaxCols in the last (it runs that one alone).
  constexpr int kMembers = 3;
  std::vector<std::vector<std::vector<float>>> got(kMembers);
  run_members(passes, kMembers, [&](int m) {
    passes.run(m + 1, 0, [&](models::ExpertSource& s) {
      auto& mine = got[static_cast<size_t>(m)];
      mine.push_back(product(pool, first.m, m, m + 1, true));
      if (m == 0) mine.push_back(product(pool, extra.m, m, 1, true));
      mine.push_back(product(pool, last.m, m, m == 2 ? quant::kMaxCols + 1 : m + 1, true));
      member_pass(s, m, 1);
    });
  });
  for (int m = 0; m < kMembers; ++m) {
    std::vector<std::vector<float>> alone = {product(pool, first.m, m, m + 1, false)};
    if (m == 0) alone.push_back(product(pool, extra.m, m, 1, false));
    alone.push_back(product(pool, last.m, m, m == 2 ? quant::kMaxCols + 1 : m + 1, false));
    ASSERT_EQ(got[static_cast<size_t>(m)].size(), alone.size());
    for (size_t k = 0; k < alone.size(); ++k) {
      // The bits, not the values: memcmp tells -0 from 0 too.
      EXPECT_EQ(std::memcmp(got[static_cast<size_t>(m)][k].data(), alone[k].data(), alone[k].size() * sizeof(float)), 0)
          << "member " << m << " product " << k;
    }
  }
  // `first` runs once for all three. Member 1 waits on `last` while member 0 waits on
  // `extra`: both run in one loop, neither shared; member 0's `last` then runs alone, and
  // member 2's is too wide to wait.
  EXPECT_EQ(passes.counts().shared_products, 1u);
  EXPECT_EQ(source.begins.size(), 1u);
}

}  // namespace
}  // namespace epq::runtime
