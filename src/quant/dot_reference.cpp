// The scalar reference kernels: decode weights and activations to floats and accumulate
// in double. Slow and obviously right; every SIMD kernel is tested against these.
#include <cstdint>
#include <vector>

#include "quant/activation.h"
#include "quant/dot.h"
#include "quant/reference.h"

namespace epq::quant {
namespace {

template <Type kType>
void dot_reference(int64_t n, const void* w_row, const void* act, size_t act_stride, int n_cols, float* out) {
  const TypeInfo& t = info(kType);
  const ActFormat f = activation_format(kType);
  const int64_t chunk = 256;  // a multiple of every block size
  float w[256], a[256];
  for (int c = 0; c < n_cols; ++c) {
    const auto* act_c = static_cast<const uint8_t*>(act) + static_cast<size_t>(c) * act_stride;
    double sum = 0;
    for (int64_t i = 0; i < n; i += chunk) {
      const int64_t k = n - i < chunk ? n - i : chunk;
      dequantize_row(kType, static_cast<const uint8_t*>(w_row) + i / t.block_elems * t.block_bytes, w, k);
      dequantize_activation(f, act_c + activation_bytes(f, i), a, k);
      for (int64_t j = 0; j < k; ++j) sum += double{w[j]} * a[j];
    }
    out[c] = static_cast<float>(sum);
  }
}

KernelSet make_scalar() {
  KernelSet s{"scalar", {}};
  auto set = [&](Type t, DotKernel k) { s.dot[static_cast<uint32_t>(t)] = k; };
  set(Type::F32, dot_reference<Type::F32>);
  set(Type::F16, dot_reference<Type::F16>);
  set(Type::BF16, dot_reference<Type::BF16>);
  set(Type::Q4_0, dot_reference<Type::Q4_0>);
  set(Type::Q4_1, dot_reference<Type::Q4_1>);
  set(Type::Q5_0, dot_reference<Type::Q5_0>);
  set(Type::Q5_1, dot_reference<Type::Q5_1>);
  set(Type::Q8_0, dot_reference<Type::Q8_0>);
  set(Type::Q2_K, dot_reference<Type::Q2_K>);
  set(Type::Q3_K, dot_reference<Type::Q3_K>);
  set(Type::Q4_K, dot_reference<Type::Q4_K>);
  set(Type::Q5_K, dot_reference<Type::Q5_K>);
  set(Type::Q6_K, dot_reference<Type::Q6_K>);
  set(Type::Q8_K, dot_reference<Type::Q8_K>);
  set(Type::IQ4_NL, dot_reference<Type::IQ4_NL>);
  set(Type::IQ4_XS, dot_reference<Type::IQ4_XS>);
  set(Type::MXFP4, dot_reference<Type::MXFP4>);
  return s;
}

}  // namespace

const KernelSet& scalar_kernels() {
  static const KernelSet s = make_scalar();
  return s;
}

}  // namespace epq::quant
