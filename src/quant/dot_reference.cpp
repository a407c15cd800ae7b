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
float dot_row(int64_t n, const uint8_t* w_row, const uint8_t* act) {
  const TypeInfo& t = info(kType);
  const ActFormat f = activation_format(kType);
  const int64_t chunk = 256;  // a multiple of every block size
  float w[256], a[256];
  double sum = 0;
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t k = n - i < chunk ? n - i : chunk;
    dequantize_row(kType, w_row + i / t.block_elems * t.block_bytes, w, k);
    dequantize_activation(f, act + activation_bytes(f, i), a, k);
    for (int64_t j = 0; j < k; ++j) sum += double{w[j]} * a[j];
  }
  return static_cast<float>(sum);
}

template <Type kType>
void dot_reference(int64_t n, const void* w, size_t row_bytes, int64_t n_rows, const void* act, size_t act_stride, int n_cols,
                   float* out, size_t out_stride) {
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int c = 0; c < n_cols; ++c) {
      out[static_cast<size_t>(c) * out_stride + static_cast<size_t>(r)] =
          dot_row<kType>(n, static_cast<const uint8_t*>(w) + static_cast<size_t>(r) * row_bytes,
                         static_cast<const uint8_t*>(act) + static_cast<size_t>(c) * act_stride);
    }
  }
}

KernelSet make_scalar() {
  KernelSet s{"scalar", {}, {}, {}, {}};
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
