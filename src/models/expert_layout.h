#pragma once
// Where one layer's routed experts live in the GGUF file. Each of gate, up and down is a
// 3-D tensor [cols, rows, n_expert]; expert e's matrix is the contiguous byte range
// [offset + e * bytes, offset + (e + 1) * bytes) of the tensor's shard.
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "quant/types.h"

namespace epq::models {

struct ExpertPart {
  quant::Type type = quant::Type::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  uint32_t shard = 0;   // the file holding it (gguf::TensorInfo::shard)
  uint64_t offset = 0;  // offset of expert 0 in that file
  uint64_t bytes = 0;   // bytes of one expert's matrix
  uint64_t expert_offset(int e) const { return offset + static_cast<uint64_t>(e) * bytes; }
};

struct ExpertLayout {
  ExpertPart gate, up, down;
  int n_expert = 0;
  uint64_t expert_bytes() const { return gate.bytes + up.bytes + down.bytes; }
  const ExpertPart& part(int i) const { return i == 0 ? gate : i == 1 ? up : down; }
};

// blk.<layer>.ffn_{gate,up,down}_exps.weight for part 0, 1, 2 (ExpertLayout::part).
std::string expert_tensor_name(int layer, int part);

// Reads the layout of blk.<layer>.ffn_{gate,up,down}_exps.weight, checking that the
// shapes agree (gate/up [n_embd, n_ff, n_expert], down [n_ff, n_embd, n_expert]).
ExpertLayout read_expert_layout(const gguf::File& file, int layer, int64_t n_embd);

}  // namespace epq::models
