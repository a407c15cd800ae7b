// The gated delta rule (core/delta_rule.h): the float recurrence against the same loop in
// double precision, the chunked form against the recurrence for several chunk splits and
// a non-zero starting state, and the recurrence's independence of how a run is split.
#include "core/delta_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace epq {
namespace {

struct Inputs {
  int dim;
  int64_t n;
  std::vector<float> q, k, v, g, beta, state;
  DeltaRuleInput view(int64_t from = 0) const {
    const size_t d = static_cast<size_t>(dim), t = static_cast<size_t>(from);
    return {q.data() + t * d, k.data() + t * d, v.data() + t * d, g.data() + t, beta.data() + t, d, d, 1};
  }
};

// q and k unit vectors (q scaled by 1/sqrt(dim)), v normal, g in [-2, 0], beta in (0, 1).
Inputs random_inputs(int dim, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::uniform_real_distribution<float> unit(0, 1);
  Inputs in{dim, n, {}, {}, {}, {}, {}, {}};
  auto unit_vector = [&](std::vector<float>& out, float scale) {
    std::vector<float> x(static_cast<size_t>(dim));
    double norm = 0;
    for (float& e : x) e = normal(rng), norm += double{e} * e;
    for (float e : x) out.push_back(static_cast<float>(e / std::sqrt(norm)) * scale);
  };
  for (int64_t t = 0; t < n; ++t) {
    unit_vector(in.q, 1.0f / std::sqrt(static_cast<float>(dim)));
    unit_vector(in.k, 1.0f);
    for (int j = 0; j < dim; ++j) in.v.push_back(normal(rng));
    in.g.push_back(-2.0f * unit(rng));
    in.beta.push_back(unit(rng));
  }
  for (int i = 0; i < dim * dim; ++i) in.state.push_back(0.3f * normal(rng));
  return in;
}

// The rule as specified, in double.
std::vector<double> reference(const Inputs& in, std::vector<double>& S) {
  const size_t d = static_cast<size_t>(in.dim);
  std::vector<double> out;
  for (int64_t t = 0; t < in.n; ++t) {
    const size_t o = static_cast<size_t>(t) * d;
    for (double& s : S) s *= std::exp(double{in.g[static_cast<size_t>(t)]});
    std::vector<double> kv(d, 0), delta(d), read(d, 0);
    for (size_t i = 0; i < d; ++i)
      for (size_t j = 0; j < d; ++j) kv[j] += S[i * d + j] * in.k[o + i];
    for (size_t j = 0; j < d; ++j) delta[j] = in.beta[static_cast<size_t>(t)] * (in.v[o + j] - kv[j]);
    for (size_t i = 0; i < d; ++i)
      for (size_t j = 0; j < d; ++j) S[i * d + j] += in.k[o + i] * delta[j];
    for (size_t i = 0; i < d; ++i)
      for (size_t j = 0; j < d; ++j) read[j] += S[i * d + j] * in.q[o + i];
    out.insert(out.end(), read.begin(), read.end());
  }
  return out;
}

TEST(DeltaRule, RecurrentAndChunkedMatchDoubleMath) {
  for (int dim : {8, 64, 128}) {
    for (int64_t n : {1, 5, 64, 150}) {
      const Inputs in = random_inputs(dim, n, static_cast<uint32_t>(dim * 1000 + n));
      std::vector<double> S_ref(in.state.begin(), in.state.end());
      const std::vector<double> expect = reference(in, S_ref);
      std::vector<float> S_rec = in.state, S_chunk = in.state, out_rec(expect.size()), out_chunk(expect.size());
      std::vector<float> scratch(delta_rule_chunk_scratch(dim));
      delta_rule_recurrent(in.view(), n, dim, S_rec.data(), out_rec.data(), static_cast<size_t>(dim));
      delta_rule_chunked(in.view(), n, dim, S_chunk.data(), out_chunk.data(), static_cast<size_t>(dim), scratch.data());
      for (size_t i = 0; i < expect.size(); ++i) {
        ASSERT_NEAR(out_rec[i], expect[i], 2e-5 * (1 + std::fabs(expect[i]))) << "dim " << dim << " n " << n << " i " << i;
        ASSERT_NEAR(out_chunk[i], expect[i], 2e-4 * (1 + std::fabs(expect[i]))) << "dim " << dim << " n " << n << " i " << i;
      }
      for (size_t i = 0; i < S_ref.size(); ++i) {
        ASSERT_NEAR(S_rec[i], S_ref[i], 2e-5 * (1 + std::fabs(S_ref[i])));
        ASSERT_NEAR(S_chunk[i], S_ref[i], 2e-4 * (1 + std::fabs(S_ref[i])));
      }
    }
  }
}

TEST(DeltaRule, RecurrentGivesTheSameBitsHoweverARunIsSplit) {
  const int dim = 64;
  const int64_t n = 40;
  const Inputs in = random_inputs(dim, n, 7);
  std::vector<float> S_whole = in.state, S_split = in.state, whole(static_cast<size_t>(n * dim)), split(whole.size());
  delta_rule_recurrent(in.view(), n, dim, S_whole.data(), whole.data(), dim);
  int64_t t = 0;
  for (int64_t len : {1, 13, 2, 24}) {
    delta_rule_recurrent(in.view(t), len, dim, S_split.data(), split.data() + t * dim, dim);
    t += len;
  }
  ASSERT_EQ(t, n);
  EXPECT_EQ(whole, split);
  EXPECT_EQ(S_whole, S_split);
}

}  // namespace
}  // namespace epq
