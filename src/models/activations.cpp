#include "models/activations.h"

#include <algorithm>

#include "core/ops.h"

namespace epq::models {

Activations::Activations(StateAllocator& alloc, int64_t max_tokens, int64_t n_embd_)
    : n_embd(n_embd_),
      x(alloc.take(static_cast<size_t>(max_tokens * n_embd_) * sizeof(float))),
      xn(alloc.take(static_cast<size_t>(max_tokens * n_embd_) * sizeof(float))),
      out(alloc.take(static_cast<size_t>(max_tokens * n_embd_) * sizeof(float))),
      input(alloc.input(max_tokens, n_embd_)) {}

void Activations::norm_input(ThreadPool& pool, const float* weight, float eps, int64_t n_tokens) {
  const int64_t E = n_embd;
  float* src = x.as<float>();
  float* dst = xn.as<float>();
  pool.run(n_tokens, [&](int64_t t, int) { ops::rms_norm(src + t * E, weight, eps, E, dst + t * E); });
  input.set(pool, dst, n_tokens, E, static_cast<size_t>(E));
}

void Activations::clear_output(int64_t n_tokens) { std::fill_n(out.as<float>(), n_tokens * n_embd, 0.0f); }

void Activations::add_output(int64_t n_tokens) { ops::add(x.as<float>(), out.as<float>(), n_tokens * n_embd); }

}  // namespace epq::models
