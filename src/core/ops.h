#pragma once
// Element-wise and row-wise float ops of the forward pass (AVX2), a small share of the
// work next to the matrix products.
#include <cstdint>

namespace epq::ops {

// out = x / sqrt(mean(x^2) + eps) * weight (out may alias x; no weight: null); the mean in double.
void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out);
// x += y
void add(float* x, const float* y, int64_t n);
// x += y * a (the product rounded, then the sum)
void add_scaled(float* x, const float* y, float a, int64_t n);
// In place softmax; the sum is accumulated in double.
void softmax(float* x, int64_t n);
// out = silu(gate) * up, silu's exponential within 2 ulp (exp8); out may alias gate.
void swiglu(const float* gate, const float* up, int64_t n, float* out);

// x *= sigmoid(gate), element-wise (an output gate).
void mul_sigmoid(float* x, const float* gate, int64_t n);
// x = x / max(||x||_2, eps) (ggml's l2_norm; the sum of squares in double).
void l2_norm(float* x, float eps, int64_t n);
// ggml's softplus: x > 20 ? x : log(1 + e^x).
float softplus(float x);
float sigmoid(float x);

}  // namespace epq::ops
