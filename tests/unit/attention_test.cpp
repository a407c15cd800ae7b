// Causal grouped-query attention (core/attention.h) against double-precision math, with
// and without a sliding window, each head's result against the same head computed alone
// or on another thread count, a ring cache against a cache with a row per position, and
// the AVX-512 kernel (native where the CPU has it, else emulated) against the AVX2 kernel.
#include "core/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/attend_task.h"
#include "quant/dot.h"
#include "quant/float_bits.h"

namespace epq {
namespace {

constexpr int kDim = 64;

struct Cache {
  std::vector<float> k, v;        // [n_head_kv][positions][kDim], the values the F16 cache holds
  std::vector<uint16_t> k16, v16;  // the same in F16
};

Cache random_cache(int64_t positions, int n_head_kv, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  Cache c;
  for (int64_t i = 0; i < positions * n_head_kv * kDim; ++i) {
    c.k16.push_back(quant::f32_to_f16(normal(rng)));
    c.v16.push_back(quant::f32_to_f16(normal(rng)));
    c.k.push_back(quant::f16_to_f32(c.k16.back()));
    c.v.push_back(quant::f16_to_f32(c.v16.back()));
  }
  return c;
}

std::vector<float> random_queries(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> q(static_cast<size_t>(n));
  for (float& x : q) x = normal(rng);
  return q;
}

// c.k16 / c.v16 hold cache_rows rows; position j is row j % cache_rows.
std::vector<float> run(int threads, const AttentionShape& s, const std::vector<float>& q, const Cache& c, const std::vector<int32_t>& pos,
                       int64_t cache_rows) {
  ThreadPool pool(threads);
  std::vector<float> out(q.size()), scratch(attention_scratch_floats(s, cache_rows, threads));
  attention(pool, s, q.data(), c.k16.data(), c.v16.data(), cache_rows, pos.data(), static_cast<int64_t>(pos.size()), out.data(),
            scratch.data());
  return out;
}

// Query heads sharing a KV head are computed 8, 4, 2 or 1 at a time: group sizes 16, 4, 2
// and 3; and with a window of 7, a query sees only its own and the 6 positions before.
TEST(Attention, MatchesDoubleMathForEveryGroupSizeAndWindow) {
  const int64_t n_pos = 37;
  for (int window : {0, 7}) {
    for (int group : {16, 4, 2, 3}) {
      const int n_head_kv = 2, n_head = group * n_head_kv;
      const AttentionShape s{n_head, n_head_kv, kDim, 0.125f, window};
      const Cache c = random_cache(n_pos, n_head_kv, 1);
      const std::vector<int32_t> pos = {0, 5, 36};  // the first, a middle and the last position
      const std::vector<float> q = random_queries(static_cast<int64_t>(pos.size()) * n_head * kDim, 2);
      const std::vector<float> out = run(2, s, q, c, pos, n_pos);
      for (size_t t = 0; t < pos.size(); ++t) {
        const int32_t first = window > 0 ? std::max(0, pos[t] - window + 1) : 0;
        for (int h = 0; h < n_head; ++h) {
          const int g = h / group;
          const float* qh = q.data() + (t * n_head + h) * kDim;
          std::vector<double> w(static_cast<size_t>(pos[t] + 1 - first));
          double max = -INFINITY, sum = 0;
          for (int32_t j = first; j <= pos[t]; ++j) {
            double dot = 0;
            for (int d = 0; d < kDim; ++d) dot += double{qh[d]} * c.k[(g * n_pos + j) * kDim + d];
            w[j - first] = dot * s.scale;
            max = std::max(max, w[j - first]);
          }
          for (double& x : w) sum += x = std::exp(x - max);
          for (int d = 0; d < kDim; ++d) {
            double expect = 0;
            for (int32_t j = first; j <= pos[t]; ++j) expect += w[j - first] / sum * c.v[(g * n_pos + j) * kDim + d];
            ASSERT_NEAR(out[(t * n_head + h) * kDim + d], expect, 1e-5)
                << "window " << window << ", group " << group << ", token " << t << ", head " << h;
          }
        }
      }
    }
  }
}

// A ring of 11 rows for a window of 5 (positions up to 40 wrap it several times) gives the
// same bits as a cache with a row per position.
TEST(Attention, RingCacheGivesTheSameBitsAsAFullCache) {
  const int64_t n_pos = 41, ring = 11;
  const int window = 5, n_head_kv = 2, n_head = 4;
  const AttentionShape s{n_head, n_head_kv, kDim, 0.125f, window};
  const Cache full = random_cache(n_pos, n_head_kv, 5);
  for (int32_t last : {4, 10, 11, 23, 40}) {
    Cache ringed;
    ringed.k16.resize(static_cast<size_t>(ring * n_head_kv * kDim));
    ringed.v16.resize(ringed.k16.size());
    for (int32_t j = 0; j <= last; ++j) {  // written in order, as a sequence fills its cache
      for (int g = 0; g < n_head_kv; ++g) {
        const auto from = static_cast<std::ptrdiff_t>((g * n_pos + j) * kDim), to = static_cast<std::ptrdiff_t>((g * ring + j % ring) * kDim);
        std::copy_n(full.k16.begin() + from, kDim, ringed.k16.begin() + to);
        std::copy_n(full.v16.begin() + from, kDim, ringed.v16.begin() + to);
      }
    }
    const std::vector<int32_t> pos = {last};
    const std::vector<float> q = random_queries(n_head * kDim, 6);
    ASSERT_EQ(run(2, s, q, ringed, pos, ring), run(2, s, q, full, pos, n_pos)) << "query at position " << last;
  }
}

TEST(Attention, HeadAloneOrInAGroupAndAnyThreadCountGiveTheSameBits) {
  const int64_t n_pos = 29;
  const int group = 8;
  const Cache c = random_cache(n_pos, 1, 3);
  const std::vector<int32_t> pos = {28, 3, 17};
  const std::vector<float> q = random_queries(static_cast<int64_t>(pos.size()) * group * kDim, 4);
  const AttentionShape grouped{group, 1, kDim, 0.2f};
  const std::vector<float> together = run(1, grouped, q, c, pos, n_pos);
  ASSERT_EQ(run(2, grouped, q, c, pos, n_pos), together);
  for (int h = 0; h < group; ++h) {
    std::vector<float> qh;
    for (size_t t = 0; t < pos.size(); ++t) qh.insert(qh.end(), q.begin() + (t * group + h) * kDim, q.begin() + (t * group + h + 1) * kDim);
    const std::vector<float> alone = run(1, {1, 1, kDim, 0.2f}, qh, c, pos, n_pos);
    for (size_t t = 0; t < pos.size(); ++t) {
      ASSERT_EQ(std::memcmp(alone.data() + t * kDim, together.data() + (t * group + h) * kDim, kDim * sizeof(float)), 0)
          << "head " << h << " of token " << t << " depends on the heads computed with it";
    }
  }
}

// One task of 2, 4 or 8 heads over a ring of 13 rows that the 10 or 11 visible positions
// wrap (an odd count leaves a position over from the AVX-512 e^x pass's pairs), for key
// and value widths of 24 and 48, 64 and 64, and MLA's 576 and 512, with scores near 0 and
// with scores far enough apart that e^(score - max) underflows to 0: the AVX-512 kernel
// gives the AVX2 kernel's bits, out and scores alike.
TEST(Attention, Avx512KernelGivesTheAvx2KernelsBits) {
  using Kernel = void (*)(int, const AttendTask&);
  std::vector<std::pair<const char*, Kernel>> kernels = {{"avx512_emulated", attend_avx512_emulated}};
  if (quant::avx512_kernels() != nullptr) kernels.push_back({"avx512", attend_avx512});
  const int64_t rows = 13, first = 9;
  for (auto [D, Dv] : {std::pair{24, 48}, std::pair{64, 64}, std::pair{576, 512}}) {
    for (auto [G, n_pos, scale] : {std::tuple{2, 10, 0.1f}, std::tuple{4, 10, 0.1f}, std::tuple{8, 10, 0.1f}, std::tuple{8, 11, 0.1f},
                                   std::tuple{8, 11, 80.0f}, std::tuple{2, 11, 80.0f}}) {
      const std::vector<float> q = random_queries(G * D, 7);
      const std::vector<float> kf = random_queries(rows * D, 8), vf = random_queries(rows * Dv, 9);
      std::vector<uint16_t> k, v;
      for (float x : kf) k.push_back(quant::f32_to_f16(x));
      for (float x : vf) v.push_back(quant::f32_to_f16(x));
      auto run_kernel = [&](Kernel kernel, std::vector<float>& scores) {
        std::vector<float> out(static_cast<size_t>(G * Dv)), packed(static_cast<size_t>(G * D));
        scores.assign(static_cast<size_t>(n_pos * G), 0.0f);
        kernel(G, {.q = q.data(), .k = k.data(), .v = v.data(), .k_stride = static_cast<size_t>(D), .v_stride = static_cast<size_t>(Dv),
                   .D = D, .Dv = Dv, .first = first, .n_pos = n_pos, .rows = rows, .scale = scale, .scores = scores.data(),
                   .packed_q = packed.data(), .out = out.data()});
        return out;
      };
      std::vector<float> avx2_scores, scores;
      const std::vector<float> avx2 = run_kernel(attend_avx2, avx2_scores);
      if (scale > 1.0f) {
        ASSERT_NE(std::count(avx2_scores.begin(), avx2_scores.end(), 0.0f), 0) << "no e^(score - max) underflowed";
      }
      for (auto [name, kernel] : kernels) {
        ASSERT_EQ(run_kernel(kernel, scores), avx2) << name << ", D " << D << ", Dv " << Dv << ", " << G << " heads, " << n_pos << " positions, scale " << scale;
        ASSERT_EQ(scores, avx2_scores) << name << ", D " << D << ", Dv " << Dv << ", " << G << " heads, " << n_pos << " positions, scale " << scale;
      }
    }
  }
}

}  // namespace
}  // namespace epq
