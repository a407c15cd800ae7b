#pragma once
// Element-wise and row-wise float ops of the forward pass. Plain loops, kept exactly as
// the model defines them; they are a small share of the work next to the matrix products.
#include <cstdint>

namespace epq::ops {

// out = x / sqrt(mean(x^2) + eps) * weight (out may alias x).
void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out);
// x += y
void add(float* x, const float* y, int64_t n);
// In place softmax; the sum is accumulated in double.
void softmax(float* x, int64_t n);
// out = silu(gate) * up
void swiglu(const float* gate, const float* up, int64_t n, float* out);

}  // namespace epq::ops
