#include "quant/rows4_layout.h"

#include <cstring>
#include <vector>

#include "util/error.h"

namespace epq::quant {
namespace {

struct Fields {
  int count;
  int size[4];  // bytes of each field, in block order
};

// The blocks of quant/blocks.h, field by field.
Fields fields(Type t) {
  switch (t) {
    case Type::Q4_0: case Type::IQ4_NL: return {2, {2, 16}};
    case Type::Q4_1: return {3, {2, 2, 16}};
    case Type::Q5_0: return {3, {2, 4, 16}};
    case Type::Q5_1: return {4, {2, 2, 4, 16}};
    case Type::MXFP4: return {2, {1, 16}};
    default: return {0, {}};
  }
}

}  // namespace

bool has_rows4_layout(Type t) { return fields(t).count != 0; }

void to_rows4_layout(Type t, uint8_t* data, int64_t rows, int64_t cols) {
  const Fields f = fields(t);
  if (f.count == 0) fail("the four-row layout does not apply to {}", name(t));
  const size_t block = static_cast<size_t>(info(t).block_bytes), n_blocks = static_cast<size_t>(cols / info(t).block_elems);
  const size_t row_size = static_cast<size_t>(row_bytes(t, cols));
  std::vector<uint8_t> group(4 * row_size);
  for (int64_t r = 0; r + 4 <= rows; r += 4) {
    uint8_t* out = data + static_cast<size_t>(r) * row_size;
    std::memcpy(group.data(), out, group.size());
    for (size_t b = 0; b < n_blocks; ++b) {
      size_t off = 0;
      for (int k = 0; k < f.count; ++k) {
        const size_t size = static_cast<size_t>(f.size[k]);
        for (size_t i = 0; i < 4; ++i) std::memcpy(out + b * 4 * block + 4 * off + i * size, group.data() + i * row_size + b * block + off, size);
        off += size;
      }
    }
  }
}

}  // namespace epq::quant
