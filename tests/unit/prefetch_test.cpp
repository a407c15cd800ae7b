// Prefetch: the next-layer predictor learns which experts follow which, the pager reads
// its predictions ahead into the slots a miss would take, and every expert it delivers,
// prefetched or not, holds exactly the file's bytes; a request that finds a prefetched
// expert counts a hit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "gguf/file.h"
#include "models/model.h"
#include "pager/next_layer_predictor.h"
#include "pager/pager.h"
#include "pager/slot_cache.h"
#include "synth/qwen3moe.h"
#include "temp_path.h"

namespace epq::pager {
namespace {

SizeClasses classes(int n_layer, int n_expert, int dense_first = 0) {
  std::vector<LayerSlotShape> shapes(static_cast<size_t>(n_layer));
  for (int l = dense_first; l < n_layer; ++l) shapes[static_cast<size_t>(l)] = {n_expert, {4096, 4096, 4096}};
  return size_classes(shapes);
}

TEST(NextLayerPredictor, NamesTheExpertsThatFollowedMostOften) {
  NextLayerPredictor p(classes(4, 8, 1));  // layer 0 dense
  EXPECT_EQ(p.next_layer(0), 1);
  EXPECT_EQ(p.next_layer(1), 2);
  EXPECT_EQ(p.next_layer(3), -1);
  std::vector<int> out;
  p.predict(1, std::vector<int>{0, 1}, 4, out);
  EXPECT_TRUE(out.empty());  // nothing seen yet
  for (int pass = 0; pass < 3; ++pass) {
    p.observe(1, std::vector<int>{0, 1});
    p.observe(2, std::vector<int>{5, 6});
    p.observe(3, std::vector<int>{2});
  }
  p.observe(1, std::vector<int>{0, 7});
  p.observe(2, std::vector<int>{3, 6});
  p.predict(1, std::vector<int>{0, 1}, 4, out);
  EXPECT_EQ(out, (std::vector<int>{6, 5, 3}));  // 6 after 0 and 1 four/three times; 5 three times; 3 once
  p.predict(1, std::vector<int>{0, 1}, 1, out);
  EXPECT_EQ(out, (std::vector<int>{6}));
  p.predict(2, std::vector<int>{5}, 4, out);
  EXPECT_EQ(out, (std::vector<int>{2}));
  p.predict(3, std::vector<int>{2}, 4, out);
  EXPECT_TRUE(out.empty());  // the last routed layer
  EXPECT_EQ(NextLayerPredictor::memory_bytes(classes(4, 8, 1)), 2u * 8 * 8 * 4 + 4 * 64);
}

TEST(SlotCache, LrfuEvictsAPrefetchNeverRequestedFirst) {
  SlotCache c(classes(2, 8), {3}, make_eviction_policy("lrfu"));
  c.begin(0);
  for (int e : {1, 2}) {
    ASSERT_EQ(c.lookup(e), -1);
    c.place(e);
  }
  const int ahead = c.place_ahead(1, 7);  // layer 1's expert 7: no request so far
  ASSERT_GE(ahead, 0);
  EXPECT_TRUE(c.holds(1, 7));
  EXPECT_EQ(c.stats().requests, 2u);  // a prefetch is not a request
  c.unpin_all();
  c.begin(0);
  ASSERT_EQ(c.lookup(3), -1);
  EXPECT_EQ(c.place(3), ahead);  // score 0 goes first
  EXPECT_FALSE(c.holds(1, 7));
}

class PrefetchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = epq::testing::temp_path("prefetch-test.gguf");
    synth::Options o = *synth::preset("tiny");  // 4 layers x 8 experts
    synth::write_qwen3moe(o, path_, [](const synth::Progress&) {});
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }
  static std::vector<models::ExpertLayout> layouts() {
    gguf::File f = gguf::File::open(path_);
    return models::read_model_info(f, {}).experts;
  }
  static bool matches_file(const Matrix& m, const models::ExpertPart& part, int expert) {
    std::ifstream in(path_, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(part.expert_offset(expert)));
    std::vector<char> bytes(part.bytes);
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return std::equal(bytes.begin(), bytes.end(), reinterpret_cast<const char*>(m.data));
  }
  static std::string path_;
};
std::string PrefetchTest::path_;

TEST_F(PrefetchTest, ReadsPredictionsAheadAndDeliversTheFilesBytes) {
  // Two passes alternate; 6 slots cannot hold both passes' 12 experts, so without
  // prefetch every request misses under LRU, and with it the next layer's experts are
  // read during the current one.
  const std::vector<std::vector<int>> passes[2] = {{{0, 1}, {2, 3}, {4, 5}, {6, 7}}, {{2, 3}, {4, 5}, {6, 7}, {0, 1}}};
  for (const char* io : {"uring", "pread"}) {
    for (Prefetch prefetch : {Prefetch::kOff, Prefetch::kHistory, Prefetch::kStaleGate}) {
      PagerOptions o{{6}, "lru", {}, prefetch};
      o.io.backend = io;
      o.io.max_read_bytes = 8192;  // several pieces per matrix
      const auto l = layouts();
      Pager pager({path_}, l, o);
      for (int pass = 0; pass < 12; ++pass) {
        for (int layer = 0; layer < 4; ++layer) {
          const std::vector<int>& experts = passes[pass % 2][static_cast<size_t>(layer)];
          // The stale gate, played by an oracle: the next layer's true experts.
          if (prefetch == Prefetch::kStaleGate && layer < 3) pager.predicted(layer + 1, passes[pass % 2][static_cast<size_t>(layer) + 1]);
          EXPECT_EQ(pager.wants_prediction(), prefetch == Prefetch::kStaleGate);
          pager.begin(layer, experts);
          std::vector<models::ReadyExpert> ready;
          while (pager.next(ready)) {
            for (const models::ReadyExpert& r : ready) {
              const int e = experts[static_cast<size_t>(r.index)];
              ASSERT_TRUE(matches_file(r.gate, l[static_cast<size_t>(layer)].gate, e) && matches_file(r.up, l[static_cast<size_t>(layer)].up, e) &&
                          matches_file(r.down, l[static_cast<size_t>(layer)].down, e))
                  << io << " prefetch " << static_cast<int>(prefetch) << " pass " << pass << " layer " << layer << " expert " << e;
            }
          }
        }
      }
      const PagerStats& s = pager.stats();
      EXPECT_EQ(s.requests, 12u * 4 * 2);
      EXPECT_EQ(s.hits + s.misses, s.requests);
      if (prefetch == Prefetch::kOff) {
        EXPECT_EQ(s.prefetched, 0u);
        EXPECT_EQ(s.predicted, 0u);
        EXPECT_EQ(s.hits, 0u) << io;
      } else {
        EXPECT_GT(s.prefetched, 0u) << io;
        EXPECT_GT(s.prefetch_used, s.prefetched / 2) << io;
        EXPECT_GE(s.hits, s.prefetch_used) << io;
        EXPECT_LE(s.prefetch_bytes, s.bytes_read);
        EXPECT_LE(s.predicted_right, s.predicted);
      }
      if (prefetch == Prefetch::kStaleGate) {
        // Every prediction is right: layers 1-3 of every pass, two experts each.
        EXPECT_EQ(s.predicted, 12u * 3 * 2) << io;
        EXPECT_EQ(s.predicted_right, s.predicted) << io;
        EXPECT_EQ(s.prefetch_used, s.prefetched) << io;
      }
    }
  }
}

}  // namespace
}  // namespace epq::pager
