#pragma once
// A view of a 2-D weight in its file encoding: `rows` rows of `cols` elements, each row
// `row_bytes` long, or with `rows4` in the four-row layout (quant/rows4_layout.h), where
// row(r) is a row's place only for r a multiple of four. Matrices never own memory; the
// weight store or the pager does.
#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace epq {

struct Matrix {
  quant::Type type = quant::Type::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  bool rows4 = false;

  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

}  // namespace epq
