#include "quant/rows4_layout.h"

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "quant/dot.h"
#include "util/error.h"

namespace epq::quant {
namespace {

// Calls arrange(dst, src, row_size) for each block index of each complete group of G rows
// of n_blocks blocks of `block` bytes: dst where the group's blocks at that index go (G x
// block bytes), src row 0's block in a copy of the group (row i's at src + i x row_size).
template <size_t G, typename Arrange>
void each_group_block(uint8_t* data, int64_t rows, size_t n_blocks, size_t block, Arrange arrange) {
  const size_t row_size = n_blocks * block;
  std::vector<uint8_t> group(G * row_size);
  for (int64_t r = 0; r + static_cast<int64_t>(G) <= rows; r += G) {
    uint8_t* out = data + static_cast<size_t>(r) * row_size;
    std::memcpy(group.data(), out, group.size());
    for (size_t b = 0; b < n_blocks; ++b) arrange(out + b * G * block, group.data() + b * block, row_size);
  }
}

// The four-row layout of a block whose fields are `Size...` bytes long, in block order.
// Fixed sizes let each field's copy be one move.
template <size_t... Size>
void rearrange(uint8_t* data, int64_t rows, size_t n_blocks) {
  each_group_block<4>(data, rows, n_blocks, (Size + ...), [](uint8_t* dst, const uint8_t* src, size_t row_size) {
    for (size_t i = 0; i < 4; ++i) {
      size_t off = 0;
      ((std::memcpy(dst + 4 * off + i * Size, src + i * row_size + off, Size), off += Size), ...);
    }
  });
}

// The sixteen-row layout of a block of kBlock bytes: 2-byte pieces (its first kHead bytes
// and its last kTail) and 4-byte pieces (the rest). Four rows' 16 bytes at a time are a
// 4 x 4 transpose of 4-byte pieces.
template <size_t kBlock, size_t kHead, size_t kTail>
void rearrange16(uint8_t* data, int64_t rows, size_t n_blocks) {
  constexpr size_t kWhole = kHead + (kBlock - kHead - kTail) / 16 * 16;
  each_group_block<16>(data, rows, n_blocks, kBlock, [](uint8_t* dst, const uint8_t* src0, size_t row_size) {
    for (size_t i0 = 0; i0 < 16; i0 += 4) {
      const uint8_t* src[4];
      for (size_t i = 0; i < 4; ++i) src[i] = src0 + (i0 + i) * row_size;
      for (size_t o = kHead; o < kWhole; o += 16) {
        auto load = [&](int i) { return _mm_loadu_ps(reinterpret_cast<const float*>(src[i] + o)); };
        __m128 x0 = load(0), x1 = load(1), x2 = load(2), x3 = load(3);
        _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
        float* to = reinterpret_cast<float*>(dst + 16 * o + 4 * i0);
        _mm_storeu_ps(to, x0), _mm_storeu_ps(to + 16, x1), _mm_storeu_ps(to + 32, x2), _mm_storeu_ps(to + 48, x3);
      }
      for (size_t i = 0; i < 4; ++i) {
        const size_t row = i0 + i;
        for (size_t o = 0; o < kHead; o += 2) std::memcpy(dst + 16 * o + 2 * row, src[i] + o, 2);
        for (size_t o = kWhole; o < kBlock - kTail; o += 4) std::memcpy(dst + 16 * o + 4 * row, src[i] + o, 4);
        for (size_t o = kBlock - kTail; o < kBlock; o += 2) std::memcpy(dst + 16 * o + 2 * row, src[i] + o, 2);
      }
    }
  });
}

// The blocks of quant/blocks.h, field by field; null for the types without the layout.
using Rearrange = void (*)(uint8_t*, int64_t, size_t);
Rearrange rearrange_for(Type t, int group_rows) {
  if (group_rows == 16) {
    switch (t) {
      case Type::Q2_K: return rearrange16<84, 0, 4>;  // scales, qs; d, dmin
      case Type::Q3_K: return rearrange16<110, 0, 2>;  // hmask, qs, scales; d
      case Type::Q4_K: return rearrange16<144, 4, 0>;  // d, dmin; scales, qs
      case Type::Q5_K: return rearrange16<176, 4, 0>;  // d, dmin; scales, qh, qs
      case Type::Q6_K: return rearrange16<210, 0, 2>;  // ql, qh, scales; d
      default: return nullptr;
    }
  }
  switch (t) {
    case Type::Q4_0: case Type::IQ4_NL: return rearrange<2, 16>;
    case Type::Q4_1: return rearrange<2, 2, 16>;
    case Type::Q5_0: return rearrange<2, 4, 16>;
    case Type::Q5_1: return rearrange<2, 2, 4, 16>;
    case Type::Q8_0: return rearrange<2, 32>;
    case Type::MXFP4: return rearrange<1, 16>;
    // IQ4_XS's code field as 32-byte ones, the size the kernel reads at a time.
    case Type::IQ4_XS: return rearrange<2, 2, 4, 32, 32, 32, 32>;
    default: return nullptr;
  }
}

}  // namespace

bool has_rows4_layout(Type t, int group_rows) { return rearrange_for(t, group_rows) != nullptr; }

bool use_rows4_layout(Type t, int64_t cols) {
  const KernelSet& set = active_kernels();
  const auto i = static_cast<uint32_t>(t);
  return dot_kernel_rows4(set, t) != nullptr && has_rows4_layout(t, set.group_rows[i]) && cols < set.rows4_below_cols[i];
}

void to_rows4_layout(Type t, uint8_t* data, int64_t rows, int64_t cols, const KernelSet& set) {
  const int group_rows = set.group_rows[static_cast<uint32_t>(t)];
  const Rearrange r = rearrange_for(t, group_rows);
  if (r == nullptr) fail("the {}-row layout does not apply to {}", group_rows, name(t));
  r(data, rows, static_cast<size_t>(cols / info(t).block_elems));
}

}  // namespace epq::quant
