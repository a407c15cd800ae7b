// The pager on a synthesized file: delivered experts hold exactly the file's bytes (in the
// four-row layout where the kernels read it), hits and misses are counted, waves work when
// a layer needs more experts than there are slots, and each eviction policy ranks victims
// as documented.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "gguf/file.h"
#include "models/model.h"
#include "pager/eviction_policy.h"
#include "pager/pager.h"
#include "pager/size_classes.h"
#include "quant/rows4_layout.h"
#include "synth/qwen3moe.h"
#include "temp_path.h"
#include "util/error.h"

namespace epq::pager {
namespace {

// The bytes of an expert's matrix, read from the file with ordinary I/O.
std::vector<uint8_t> file_bytes(const std::string& path, const models::ExpertPart& part, int expert) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(part.expert_offset(expert)));
  std::vector<uint8_t> out(part.bytes);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  return out;
}

// A delivered expert holds the file's bytes: as they are, or in the four- or sixteen-row
// layout (quant/rows4_layout.h) where its matrices say so, which only those of the types the
// active kernels read in it may.
void expect_file_bytes(const std::string& path, const models::ReadyExpert& r, const models::ExpertLayout& l, int expert) {
  const Matrix* m[3] = {&r.gate, &r.up, &r.down};
  for (int p = 0; p < 3; ++p) {
    const models::ExpertPart& part = l.part(p);
    std::vector<uint8_t> expected = file_bytes(path, part, expert);
    if (m[p]->rows4) {
      ASSERT_TRUE(quant::use_rows4_layout(part.type, part.cols)) << "part " << p;
      quant::to_rows4_layout(part.type, expected.data(), part.rows, part.cols);
    }
    ASSERT_EQ(std::vector<uint8_t>(m[p]->data, m[p]->data + expected.size()), expected) << "part " << p << " expert " << expert;
    EXPECT_EQ(m[p]->rows, part.rows);
  }
}

class PagerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = epq::testing::temp_path("pager-test.gguf");
    synth::Options o = *synth::preset("tiny");
    o.tail_layers = 1;
    o.type_tail_experts = quant::Type::BF16;  // layers 0-2 one size class, layer 3 another
    synth::write_qwen3moe(o, path_, [](const synth::Progress&) {});
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }

  static std::vector<models::ExpertLayout> layouts() {
    gguf::File f = gguf::File::open(path_);
    return models::read_model_info(f, {}).experts;
  }

  static void expect_matches_file(const models::ReadyExpert& r, const models::ExpertLayout& l, int expert) {
    expect_file_bytes(path_, r, l, expert);
  }

  static std::string path_;
};
std::string PagerTest::path_;

TEST_F(PagerTest, SizeClassesSeparateMixedTypes) {
  SizeClasses c = size_classes(layouts());
  ASSERT_EQ(c.classes.size(), 2u);
  EXPECT_EQ(c.classes[0].layers, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(c.classes[1].layers, (std::vector<int>{3}));
  EXPECT_LT(c.classes[0].slot_bytes, c.classes[1].slot_bytes);
  EXPECT_EQ(c.classes[0].slot_bytes % kDirectAlign, 0u);
  EXPECT_EQ(c.class_of_layer, (std::vector<int>{0, 0, 0, 1}));
}

void run_layer(Pager& pager, int layer, std::vector<int> experts, std::vector<int>* delivered_order) {
  pager.begin(layer, experts);
  std::vector<models::ReadyExpert> ready;
  while (pager.next(ready)) {
    for (const auto& r : ready) delivered_order->push_back(experts[static_cast<size_t>(r.index)]);
  }
}

TEST_F(PagerTest, DeliversFileBytesCountsHitsAndMisses) {
  for (const char* io : {"uring", "pread"}) {
    PagerOptions o{{4, 2}, "lru", {}};
    o.io.backend = io;
    o.io.max_read_bytes = 16384;  // split every read into several pieces
    auto l = layouts();
    Pager pager({path_}, l, o);
    std::vector<int> experts = {5, 1, 7};
    pager.begin(0, experts);
    std::vector<models::ReadyExpert> ready;
    std::vector<int> seen;
    while (pager.next(ready)) {
      for (const auto& r : ready) {
        expect_matches_file(r, l[0], experts[static_cast<size_t>(r.index)]);
        seen.push_back(r.index);
      }
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(pager.stats().misses, 3u);
    EXPECT_EQ(pager.stats().hits, 0u);
    std::vector<int> order;
    run_layer(pager, 0, {1, 5}, &order);  // both cached
    EXPECT_EQ(pager.stats().hits, 2u);
    EXPECT_EQ(pager.stats().evictions(), 0u);
    run_layer(pager, 3, {2, 6}, &order);  // the BF16 class, its own slots
    EXPECT_EQ(pager.stats().evictions(), 0u);
    EXPECT_EQ(pager.stats().misses, 5u);
  }
}

TEST_F(PagerTest, WavesWhenALayerNeedsMoreExpertsThanSlots) {
  auto l = layouts();
  Pager pager({path_}, l, PagerOptions{{1, 1}, "lru", {}});
  std::vector<int> experts = {0, 3, 6, 2};
  pager.begin(1, experts);
  std::vector<models::ReadyExpert> ready;
  int batches = 0;
  while (pager.next(ready)) {
    ASSERT_EQ(ready.size(), 1u);  // one slot: one expert at a time
    expect_matches_file(ready[0], l[1], experts[static_cast<size_t>(ready[0].index)]);
    ++batches;
  }
  EXPECT_EQ(batches, 4);
  EXPECT_EQ(pager.stats().evictions(), 3u);
}

TEST(PagerRows4, ExpertsUsedAgainAreRearrangedIntoTheFourRowLayout) {
  // Where the kernels read the layout (AVX-512), an expert is rearranged in its slot when
  // it is handed out the kUsesBeforeRearranging-th time since it was read; an expert
  // evicted and read again is the file's again until then. Elsewhere experts stay the file's.
  const std::string path = epq::testing::temp_path("pager-rows4-test.gguf");
  synth::Options o = *synth::preset("tiny");
  o.type_expert = quant::Type::Q4_0;
  o.type_expert_down = quant::Type::IQ4_NL;
  synth::write_qwen3moe(o, path, [](const synth::Progress&) {});
  const auto l = models::read_model_info(gguf::File::open(path), {}).experts;
  const bool kernels_read_it = quant::use_rows4_layout(quant::Type::Q4_0, o.n_embd);
  Pager pager({path}, l, PagerOptions{{2}, "lru", {}});
  struct Request {
    std::vector<int> experts;
    bool rows4;
  };
  std::vector<Request> requests;
  auto uses = [&](std::vector<int> experts, int times) {
    for (int k = 1; k <= times; ++k) requests.push_back({experts, k >= kUsesBeforeRearranging});
  };
  uses({1, 2}, kUsesBeforeRearranging + 1);
  uses({3, 4}, 1);  // evicts 1 and 2
  uses({1}, kUsesBeforeRearranging);
  for (const Request& q : requests) {
    pager.begin(0, q.experts);
    std::vector<models::ReadyExpert> ready;
    while (pager.next(ready)) {
      for (const auto& r : ready) {
        expect_file_bytes(path, r, l[0], q.experts[static_cast<size_t>(r.index)]);
        for (const Matrix* m : {&r.gate, &r.up, &r.down}) EXPECT_EQ(m->rows4, q.rows4 && kernels_read_it);
      }
    }
  }
  EXPECT_EQ(pager.stats().evictions(), 3u);
  std::filesystem::remove(path);
}

TEST(EvictionPolicy, RanksAsDocumented) {
  // Layer being computed: 5 of pass 10. Slots: (layer, last use, pass).
  const EvictionContext ctx{5, 10};
  const std::vector<SlotUse> slots = {
      {2, 100, 10},  // current-left
      {7, 50, 9},    // stale-right
      {3, 40, 9},    // stale-left
      {8, 120, 10},  // current-right (cannot happen mid-pass for layer > 5, but ranks anyway)
      {4, 30, 9},    // stale-left, higher layer
  };
  auto order = [&](const std::string& name) {
    auto p = make_eviction_policy(name);
    std::vector<int> idx = {0, 1, 2, 3, 4};
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return p->key(slots[a], ctx) < p->key(slots[b], ctx); });
    return idx;
  };
  EXPECT_EQ(order("lru"), (std::vector<int>{4, 2, 1, 0, 3}));     // by last use
  EXPECT_EQ(order("ls"), (std::vector<int>{2, 4, 1, 0, 3}));      // stale by layer, then current by layer
  EXPECT_EQ(order("ls-pos"), (std::vector<int>{4, 2, 0, 1, 3}));  // stale-left (far first), current-left, stale-right, current-right
  EXPECT_THROW(make_eviction_policy("fifo"), Error);
}

}  // namespace
}  // namespace epq::pager
