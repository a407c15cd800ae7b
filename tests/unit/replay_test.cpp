// Routing traces and their replay: a written trace reads back as written, a damaged one
// is one clear Error; replay counts what the pager counts on the same requests; Belady's
// MIN is never below any policy; --slots N divides like the memory plan.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "pager/pager.h"
#include "runtime/memory_plan.h"
#include "runtime/replay.h"
#include "runtime/routing_trace.h"
#include "synth/qwen3moe.h"
#include "temp_path.h"
#include "util/error.h"

namespace epq::runtime {
namespace {

// A header for n_layer layers of n_expert experts of 3 pages (odd layers of 4 pages with
// `two_classes`), top-k.
TraceHeader header(int n_layer, int n_expert, int k, bool two_classes = false) {
  TraceHeader h{"qwen3moe", "test.gguf", n_layer, n_expert, k, {}, {}};
  for (int l = 0; l < n_layer; ++l) {
    const bool big = two_classes && l % 2 == 1;
    h.layers.push_back({n_expert, {4096, 4096, big ? 8192u : 4096u}});
    h.read_pages.push_back(std::vector<uint32_t>(static_cast<size_t>(n_expert), big ? 4 : 3));
  }
  return h;
}

// Random routing: `passes` passes of 1..max_tokens tokens, each token choosing k distinct
// experts with a Zipf-like preference of strength `skew` (0: uniform).
RoutingTrace random_trace(const TraceHeader& h, int passes, int max_tokens, double skew, uint32_t seed) {
  std::mt19937 rng(seed);
  RoutingTrace t{h, {}};
  std::vector<double> weight(static_cast<size_t>(h.n_expert));
  for (int e = 0; e < h.n_expert; ++e) weight[static_cast<size_t>(e)] = 1.0 / std::pow(e + 1.0, skew);
  for (int p = 0; p < passes; ++p) {
    TracePass& pass = t.passes.emplace_back();
    pass.n_tokens = 1 + static_cast<int>(rng() % static_cast<uint32_t>(max_tokens));
    for (int l = 0; l < h.n_layer; ++l) {
      TraceLayer& layer = pass.layers.emplace_back();
      layer.layer = l;
      layer.n_tokens = pass.n_tokens;
      for (int tok = 0; tok < pass.n_tokens; ++tok) {
        std::vector<double> w = weight;
        for (int j = 0; j < h.k; ++j) {
          std::discrete_distribution<int> pick(w.begin(), w.end());
          const int raw = pick(rng);
          w[static_cast<size_t>(raw)] = 0;  // k distinct choices
          const int e = (raw + l * 7) % h.n_expert;  // each layer favours other experts
          layer.experts.push_back(static_cast<uint16_t>(e));
          layer.weights.push_back(1.0f / static_cast<float>(h.k));
        }
      }
    }
  }
  return t;
}

// Every layer asks for the same cyclic run of experts, one more than fits: LRU's worst case.
RoutingTrace cyclic_trace(const TraceHeader& h, int passes, int span) {
  RoutingTrace t{h, {}};
  int next = 0;
  for (int p = 0; p < passes; ++p) {
    TracePass& pass = t.passes.emplace_back();
    pass.n_tokens = 1;
    for (int l = 0; l < h.n_layer; ++l) {
      TraceLayer& layer = pass.layers.emplace_back();
      layer.layer = l;
      layer.n_tokens = 1;
      for (int j = 0; j < h.k; ++j) {
        layer.experts.push_back(static_cast<uint16_t>((next + j) % span));
        layer.weights.push_back(0.5f);
      }
    }
    next = (next + h.k) % span;
  }
  return t;
}

std::string write(const RoutingTrace& t, const std::string& name) {
  const std::string path = epq::testing::temp_path(name);
  TraceWriter w(path, t.header);
  for (const TracePass& p : t.passes) {
    w.pass(p.n_tokens, p.pos0);
    for (const TraceLayer& l : p.layers) {
      const std::vector<int> experts(l.experts.begin(), l.experts.end());
      w.layer(l.layer, experts, l.weights);
    }
  }
  return path;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string error_of(const std::string& path) {
  try {
    read_routing_trace(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RoutingTrace, ReadsBackWhatWasWritten) {
  const RoutingTrace t = random_trace(header(3, 16, 2, true), 20, 5, 1.0, 1);
  const std::string path = write(t, "roundtrip.trace");
  const RoutingTrace r = read_routing_trace(path);
  EXPECT_EQ(r.header.mismatch(t.header), "");
  EXPECT_EQ(r.header.model, "test.gguf");
  ASSERT_EQ(r.passes.size(), t.passes.size());
  for (size_t p = 0; p < t.passes.size(); ++p) {
    ASSERT_EQ(r.passes[p].layers.size(), t.passes[p].layers.size());
    EXPECT_EQ(r.passes[p].n_tokens, t.passes[p].n_tokens);
    for (size_t l = 0; l < t.passes[p].layers.size(); ++l) {
      EXPECT_EQ(r.passes[p].layers[l].experts, t.passes[p].layers[l].experts);
      EXPECT_EQ(r.passes[p].layers[l].weights, t.passes[p].layers[l].weights);
    }
  }
  EXPECT_EQ(r.header.read_bytes(1, 3), 4u * 4096);
  std::filesystem::remove(path);
}

TEST(RoutingTrace, DamagedTracesAreOneClearError) {
  const std::string path = write(random_trace(header(2, 8, 2), 3, 2, 0, 2), "damaged.trace");
  const std::string good = read_bytes(path);
  // Every truncation, at every byte.
  for (size_t n = 0; n < good.size(); ++n) {
    write_bytes(path, good.substr(0, n));
    const std::string e = error_of(path);
    EXPECT_TRUE(e.find(n < 8 ? "not a routing trace" : "truncated") != std::string::npos) << n << ": " << e;
  }
  std::string bad = good;
  bad[0] = 'X';
  write_bytes(path, bad);
  EXPECT_NE(error_of(path).find("does not start with EPQTRACE"), std::string::npos);
  bad = good;
  bad[8] = 9;  // version
  write_bytes(path, bad);
  EXPECT_NE(error_of(path).find("version 9 is not supported"), std::string::npos);
  write_bytes(path, good + "x");
  EXPECT_NE(error_of(path).find("after the end record"), std::string::npos);
  // An expert id past the layer's experts: the first choice of the first layer record.
  bad = good;
  const size_t first_choice = good.find('L') + 1 + 2 + 4;
  bad[first_choice] = 99;
  write_bytes(path, bad);
  EXPECT_NE(error_of(path).find("expert 99 of layer 0"), std::string::npos) << error_of(path);
  std::filesystem::remove(path);
}

TEST(Replay, SlotsForTotalDividesLikeTheMemoryPlan) {
  const pager::SizeClasses one = trace_size_classes(header(4, 16, 2));
  EXPECT_EQ(slots_for_total(one, 2, 2), (std::vector<int64_t>{2}));
  EXPECT_EQ(slots_for_total(one, 2, 37), (std::vector<int64_t>{37}));
  EXPECT_THROW(slots_for_total(one, 2, 1), Error);
  EXPECT_THROW(slots_for_total(one, 2, 65), Error);
  const pager::SizeClasses two = trace_size_classes(header(4, 16, 2, true));
  ASSERT_EQ(two.classes.size(), 2u);
  for (int64_t n = 4; n <= 64; ++n) {
    const std::vector<int64_t> s = slots_for_total(two, 2, n);
    EXPECT_LE(s[0] + s[1], n);
    EXPECT_GE(s[0] + s[1], n - 1);  // rounding leaves at most a slot unused here
    EXPECT_GE(s[0], 2);
    EXPECT_GE(s[1], 2);
  }
  EXPECT_EQ(slots_for_total(two, 2, 64), (std::vector<int64_t>{32, 32}));
}

TEST(Replay, BeladyIsNeverBelowAnyPolicy) {
  struct Case {
    RoutingTrace trace;
    std::string what;
  };
  std::vector<Case> cases;
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    cases.push_back({random_trace(header(4, 16, 2), 150, 1, 1.0, seed), "decode, skewed"});
    cases.push_back({random_trace(header(4, 16, 2, true), 100, 6, 0.0, seed), "batches, uniform, two classes"});
  }
  cases.push_back({cyclic_trace(header(3, 16, 2), 200, 9), "cyclic"});
  cases.push_back({cyclic_trace(header(2, 16, 4), 200, 16), "cyclic, whole layer"});
  for (const Case& c : cases) {
    const pager::SizeClasses classes = trace_size_classes(c.trace.header);
    int64_t all = 0;
    for (const auto& cl : classes.classes) all += static_cast<int64_t>(cl.total_experts());
    for (int64_t n = 2 * c.trace.header.k; n <= all; n += 3) {
      const std::vector<int64_t> slots = slots_for_total(classes, c.trace.header.k, n);
      const pager::PagerStats best = replay_trace(c.trace, classes, slots, make_belady_policy(c.trace));
      for (const std::string& name : pager::eviction_policy_names()) {
        const pager::PagerStats s = replay_trace(c.trace, classes, slots, pager::make_eviction_policy(name));
        EXPECT_EQ(s.requests, best.requests);
        EXPECT_GE(best.hits, s.hits) << c.what << ", " << n << " slots, " << name;
        EXPECT_LE(best.bytes_read, s.bytes_read) << c.what << ", " << n << " slots, " << name;
      }
    }
  }
}

// The pager on a synthesized file and the replay of the same requests agree on every
// counter (no waves: each class has more slots than a request has experts).
TEST(Replay, CountsWhatThePagerCounts) {
  const std::string path = epq::testing::temp_path("replay-pager.gguf");
  synth::Options o = *synth::preset("tiny");
  o.tail_layers = 1;
  o.type_tail_experts = quant::Type::BF16;  // two size classes
  synth::write_qwen3moe(o, path, [](const synth::Progress&) {});
  const models::ModelInfo info = [&] {
    gguf::File f = gguf::File::open(path);
    return models::read_model_info(f, {});
  }();
  const TraceHeader h = TraceHeader::of_model(path, info);
  const RoutingTrace trace = random_trace(h, 60, 3, 0.7, 5);
  const pager::SizeClasses classes = trace_size_classes(h);
  for (const std::string& name : pager::eviction_policy_names()) {
    const std::vector<int64_t> slots = {7, 6};
    pager::Pager pager({path}, info.experts, {slots, name, {}});
    std::vector<models::ReadyExpert> ready;
    for (const TracePass& p : trace.passes) {
      for (const TraceLayer& l : p.layers) {
        const std::vector<int> experts = l.distinct();
        pager.begin(l.layer, experts);
        while (pager.next(ready)) {
        }
      }
    }
    const pager::PagerStats want = pager.stats(), got = replay_trace(trace, classes, slots, pager::make_eviction_policy(name));
    EXPECT_EQ(got.requests, want.requests) << name;
    EXPECT_EQ(got.hits, want.hits) << name;
    EXPECT_EQ(got.misses, want.misses) << name;
    EXPECT_EQ(got.evictions_stale_left, want.evictions_stale_left) << name;
    EXPECT_EQ(got.evictions_stale_right, want.evictions_stale_right) << name;
    EXPECT_EQ(got.evictions_current_left, want.evictions_current_left) << name;
    EXPECT_EQ(got.evictions_current_right, want.evictions_current_right) << name;
    EXPECT_EQ(got.bytes_read, want.bytes_read) << name;
    EXPECT_GT(got.evictions(), 0u) << name;
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace epq::runtime
