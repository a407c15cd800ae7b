#include "quant/rows4_layout.h"

#include <cstring>
#include <vector>

#include "quant/dot.h"
#include "util/error.h"

namespace epq::quant {
namespace {

// Rearranges the complete groups of four rows of a block whose fields are `Size...` bytes
// long, in block order. Fixed sizes let each field's copy be one move.
template <size_t... Size>
void rearrange(uint8_t* data, int64_t rows, size_t n_blocks) {
  constexpr size_t block = (Size + ...);
  const size_t row_size = n_blocks * block;
  std::vector<uint8_t> group(4 * row_size);
  for (int64_t r = 0; r + 4 <= rows; r += 4) {
    uint8_t* out = data + static_cast<size_t>(r) * row_size;
    std::memcpy(group.data(), out, group.size());
    for (size_t b = 0; b < n_blocks; ++b) {
      uint8_t* dst = out + b * 4 * block;
      for (size_t i = 0; i < 4; ++i) {
        const uint8_t* src = group.data() + i * row_size + b * block;
        size_t off = 0;
        ((std::memcpy(dst + 4 * off + i * Size, src + off, Size), off += Size), ...);
      }
    }
  }
}

// The blocks of quant/blocks.h, field by field; null for the types without the layout.
using Rearrange = void (*)(uint8_t*, int64_t, size_t);
Rearrange rearrange_for(Type t) {
  switch (t) {
    case Type::Q4_0: case Type::IQ4_NL: return rearrange<2, 16>;
    case Type::Q4_1: return rearrange<2, 2, 16>;
    case Type::Q5_0: return rearrange<2, 4, 16>;
    case Type::Q5_1: return rearrange<2, 2, 4, 16>;
    case Type::Q8_0: return rearrange<2, 32>;
    case Type::MXFP4: return rearrange<1, 16>;
    // The K formats' long code fields as 32-byte ones, the size the kernels read at a time.
    case Type::Q2_K: return rearrange<16, 32, 32, 2, 2>;
    case Type::IQ4_XS: return rearrange<2, 2, 4, 32, 32, 32, 32>;
    case Type::Q4_K: return rearrange<2, 2, 12, 32, 32, 32, 32>;
    case Type::Q5_K: return rearrange<2, 2, 12, 32, 32, 32, 32, 32>;
    case Type::Q6_K: return rearrange<32, 32, 32, 32, 32, 32, 16, 2>;
    default: return nullptr;
  }
}

}  // namespace

bool has_rows4_layout(Type t) { return rearrange_for(t) != nullptr; }

bool use_rows4_layout(Type t, int64_t cols) {
  const KernelSet& set = active_kernels();
  return has_rows4_layout(t) && dot_kernel_rows4(set, t) != nullptr && cols < set.rows4_below_cols[static_cast<uint32_t>(t)];
}

void to_rows4_layout(Type t, uint8_t* data, int64_t rows, int64_t cols) {
  const Rearrange r = rearrange_for(t);
  if (r == nullptr) fail("the four-row layout does not apply to {}", name(t));
  r(data, rows, static_cast<size_t>(cols / info(t).block_elems));
}

}  // namespace epq::quant
