#include "core/rope.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace epq {
namespace {

// The dimension at which rotation has n_rot full turns over the original context.
float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) * std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2 * std::numbers::pi_v<float>)) /
         (2 * std::log(base));
}

float yarn_ramp(float low, float high, int i0) {
  const float y = (static_cast<float>(i0 / 2) - low) / std::max(0.001f, high - low);
  return 1 - std::min(1.0f, std::max(0.0f, y));
}

}  // namespace

RopeTable::RopeTable(const RopeParams& params) : p_(params) {
  if (p_.ext_factor != 0) {
    corr_low_ = std::max(0.0f, std::floor(corr_dim(p_.n_dims, p_.n_ctx_orig, p_.beta_fast, p_.freq_base)));
    corr_high_ = std::min(static_cast<float>(p_.n_dims - 1), std::ceil(corr_dim(p_.n_dims, p_.n_ctx_orig, p_.beta_slow, p_.freq_base)));
  }
}

void RopeTable::compute(const int32_t* positions, int64_t n) {
  const int half = p_.n_dims / 2;
  cos_.resize(static_cast<size_t>(n * half));
  sin_.resize(cos_.size());
  const float theta_scale = std::pow(p_.freq_base, -2.0f / static_cast<float>(p_.n_dims));
  for (int64_t t = 0; t < n; ++t) {
    float theta_extrap = static_cast<float>(positions[t]);
    for (int i = 0; i < half; ++i) {
      const int i0 = 2 * i;
      const float theta_interp = p_.freq_scale * theta_extrap;
      float theta = theta_interp;
      float mscale = p_.attn_factor;
      if (p_.ext_factor != 0) {
        const float mix = yarn_ramp(corr_low_, corr_high_, i0) * p_.ext_factor;
        theta = theta_interp * (1 - mix) + theta_extrap * mix;
        mscale *= 1.0f + 0.1f * std::log(1.0f / p_.freq_scale);
      }
      cos_[static_cast<size_t>(t * half + i)] = std::cos(theta) * mscale;
      sin_[static_cast<size_t>(t * half + i)] = std::sin(theta) * mscale;
      theta_extrap *= theta_scale;
    }
  }
}

void RopeTable::apply(float* head, int64_t t) const {
  const int half = p_.n_dims / 2;
  const float* c = cos_.data() + t * half;
  const float* s = sin_.data() + t * half;
  const int second = p_.neox ? half : 1, step = p_.neox ? 1 : 2;  // pair i is (i * step, i * step + second)
  int i = 0;
  if (p_.neox) {  // eight pairs at a time, the operations of the loop below
    for (; i + 8 <= half; i += 8) {
      const __m256 x0 = _mm256_loadu_ps(head + i), x1 = _mm256_loadu_ps(head + half + i);
      const __m256 ci = _mm256_loadu_ps(c + i), si = _mm256_loadu_ps(s + i);
      _mm256_storeu_ps(head + i, _mm256_sub_ps(_mm256_mul_ps(x0, ci), _mm256_mul_ps(x1, si)));
      _mm256_storeu_ps(head + half + i, _mm256_add_ps(_mm256_mul_ps(x0, si), _mm256_mul_ps(x1, ci)));
    }
  }
  for (; i < half; ++i) {
    float* x = head + i * step;
    const float x0 = x[0], x1 = x[second];
    x[0] = x0 * c[i] - x1 * s[i];
    x[second] = x0 * s[i] + x1 * c[i];
  }
}

}  // namespace epq
