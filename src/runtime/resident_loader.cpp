#include "runtime/resident_loader.h"

#include <cstdio>

#include "models/tensor_role.h"
#include "quant/rows4_layout.h"

namespace epq::runtime {
namespace {

bool resident(const gguf::TensorInfo& t, int n_layer) {
  if (models::classify_tensor(t.name) == models::TensorRole::kRoutedExpert) return false;
  int block = -1;
  return !(std::sscanf(t.name.c_str(), "blk.%d.", &block) == 1 && block >= n_layer);
}

// A layer's matrix (never the token embeddings, whose rows are looked up one by one) that
// the active kernels can read in the four-row layout.
bool rows4_layout(const gguf::TensorInfo& t) { return t.name.starts_with("blk.") && t.dims.size() == 2 && quant::use_rows4_layout(t.type, t.dims[0]); }

uint64_t region_bytes(const gguf::TensorInfo& t) { return pager::align_up(t.offset + t.bytes) - pager::align_down(t.offset); }

}  // namespace

uint64_t resident_bytes(const gguf::File& file, int n_layer) {
  uint64_t total = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (resident(t, n_layer)) total += region_bytes(t);
  }
  return total;
}

ResidentLoader::ResidentLoader(const gguf::File& file, const pager::ShardFiles& source, int n_layer)
    : buffer_(resident_bytes(file, n_layer)) {
  uint64_t at = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (!resident(t, n_layer)) continue;
    const uint64_t start = pager::align_down(t.offset), length = region_bytes(t);
    uint8_t* dest = buffer_.data() + at;
    source[t.shard].read_aligned(start, length, dest, t.offset + t.bytes - start);
    uint8_t* data = dest + (t.offset - start);
    const bool rows4 = rows4_layout(t);
    if (rows4) quant::to_rows4_layout(t.type, data, t.dims[1], t.dims[0]);
    weights_.add(t.name, data, rows4);
    at += length;
  }
}

}  // namespace epq::runtime
