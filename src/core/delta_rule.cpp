#include "core/delta_rule.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace epq {
namespace {

float dot(const float* a, const float* b, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y += a * x
void axpy(float* y, const float* x, float a, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

void delta_rule_recurrent(const DeltaRuleInput& in, int64_t n_tokens, int dim, float* S, float* o, size_t o_stride) {
  // Two passes over the state per token. With the decayed state D = e^g S, the update
  // S' = D + k d^T gives d = beta (v - e^g S^T k) and o = S'^T q = e^g S^T q + (k.q) d, so
  // the first pass only reads S (for S^T k and S^T q) and the second rewrites it.
  const size_t n = static_cast<size_t>(dim);  // a multiple of 8
  alignas(32) float a[512], b[512], delta[512];
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* q = in.q + static_cast<size_t>(t) * in.qk_stride;
    const float* k = in.k + static_cast<size_t>(t) * in.qk_stride;
    const float* v = in.v + static_cast<size_t>(t) * in.v_stride;
    const float decay = std::exp(in.g[static_cast<size_t>(t) * in.gb_stride]);
    const float beta = in.beta[static_cast<size_t>(t) * in.gb_stride];
    float* out = o + static_cast<size_t>(t) * o_stride;
    // S^T k and S^T q, 32 columns at a time in registers.
    for (size_t j0 = 0; j0 < n; j0 += 32) {
      const size_t width = std::min<size_t>(32, n - j0) / 8;
      __m256 acc_a[4], acc_b[4];
      for (size_t u = 0; u < 4; ++u) acc_a[u] = acc_b[u] = _mm256_setzero_ps();
      for (size_t i = 0; i < n; ++i) {
        const float* row = S + i * n + j0;
        const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
        for (size_t u = 0; u < width; ++u) {
          const __m256 r = _mm256_loadu_ps(row + 8 * u);
          acc_a[u] = _mm256_fmadd_ps(r, ki, acc_a[u]);
          acc_b[u] = _mm256_fmadd_ps(r, qi, acc_b[u]);
        }
      }
      for (size_t u = 0; u < width; ++u) {
        _mm256_store_ps(a + j0 + 8 * u, acc_a[u]);
        _mm256_store_ps(b + j0 + 8 * u, acc_b[u]);
      }
    }
    const float kq = dot(k, q, dim);
    for (size_t j = 0; j < n; ++j) {
      delta[j] = beta * (v[j] - decay * a[j]);
      out[j] = decay * b[j] + kq * delta[j];
    }
    const __m256 dv = _mm256_set1_ps(decay);
    for (size_t i = 0; i < n; ++i) {
      float* row = S + i * n;
      const __m256 ki = _mm256_set1_ps(k[i]);
      for (size_t j = 0; j < n; j += 8) {
        _mm256_storeu_ps(row + j, _mm256_fmadd_ps(ki, _mm256_load_ps(delta + j), _mm256_mul_ps(dv, _mm256_loadu_ps(row + j))));
      }
    }
  }
}

size_t delta_rule_chunk_scratch(int dim) {
  const size_t C = kDeltaChunk, n = static_cast<size_t>(dim);
  return C + C * C + 2 * C * n;  // G, A, U (becomes V'), W
}

void delta_rule_chunked(const DeltaRuleInput& in, int64_t n_tokens, int dim, float* S, float* o, size_t o_stride, float* scratch) {
  const size_t n = static_cast<size_t>(dim), C = kDeltaChunk;
  float* G = scratch;
  float* A = G + C;
  float* U = A + C * C;
  float* W = U + C * n;
  for (int64_t c0 = 0; c0 < n_tokens; c0 += kDeltaChunk) {
    const size_t len = static_cast<size_t>(std::min<int64_t>(kDeltaChunk, n_tokens - c0));
    auto q = [&](size_t t) { return in.q + (static_cast<size_t>(c0) + t) * in.qk_stride; };
    auto k = [&](size_t t) { return in.k + (static_cast<size_t>(c0) + t) * in.qk_stride; };
    auto v = [&](size_t t) { return in.v + (static_cast<size_t>(c0) + t) * in.v_stride; };
    auto beta = [&](size_t t) { return in.beta[(static_cast<size_t>(c0) + t) * in.gb_stride]; };
    float sum = 0;
    for (size_t t = 0; t < len; ++t) G[t] = sum += in.g[(static_cast<size_t>(c0) + t) * in.gb_stride];
    for (size_t t = 0; t < len; ++t) {
      for (size_t s = 0; s < t; ++s) A[t * C + s] = beta(t) * dot(k(t), k(s), dim) * std::exp(G[t] - G[s]);
    }
    // Forward substitution: U_t = beta_t v_t - sum_{s<t} A[t][s] U_s, likewise W.
    for (size_t t = 0; t < len; ++t) {
      float* u = U + t * n;
      float* w = W + t * n;
      const float bt = beta(t), bg = beta(t) * std::exp(G[t]);
      for (size_t j = 0; j < n; ++j) u[j] = bt * v(t)[j], w[j] = bg * k(t)[j];
      for (size_t s = 0; s < t; ++s) {
        axpy(u, U + s * n, -A[t * C + s], dim);
        axpy(w, W + s * n, -A[t * C + s], dim);
      }
    }
    // V'_t = U_t - S_prev^T W_t (in U), and the state's share of the output.
    for (size_t t = 0; t < len; ++t) {
      float* u = U + t * n;
      float* out = o + (static_cast<size_t>(c0) + t) * o_stride;
      std::fill_n(out, n, 0.0f);
      const float eg = std::exp(G[t]);
      for (size_t i = 0; i < n; ++i) {
        axpy(u, S + i * n, -W[t * n + i], dim);
        axpy(out, S + i * n, eg * q(t)[i], dim);
      }
    }
    for (size_t t = 0; t < len; ++t) {
      float* out = o + (static_cast<size_t>(c0) + t) * o_stride;
      for (size_t s = 0; s <= t; ++s) axpy(out, U + s * n, dot(q(t), k(s), dim) * std::exp(G[t] - G[s]), dim);
    }
    const float g_last = G[len - 1];
    const float decay = std::exp(g_last);
    for (size_t i = 0; i < n; ++i) {
      float* row = S + i * n;
      for (size_t j = 0; j < n; ++j) row[j] *= decay;
      for (size_t s = 0; s < len; ++s) axpy(row, U + s * n, std::exp(g_last - G[s]) * k(s)[i], dim);
    }
  }
}

}  // namespace epq
