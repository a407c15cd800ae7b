#include "runtime/resident_loader.h"

#include "models/tensor_role.h"

namespace epq::runtime {
namespace {

bool resident(const gguf::TensorInfo& t) { return models::classify_tensor(t.name) != models::TensorRole::kRoutedExpert; }

uint64_t region_bytes(const gguf::TensorInfo& t) { return pager::align_up(t.offset + t.bytes) - pager::align_down(t.offset); }

}  // namespace

uint64_t resident_bytes(const gguf::File& file) {
  uint64_t total = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (resident(t)) total += region_bytes(t);
  }
  return total;
}

ResidentLoader::ResidentLoader(const gguf::File& file, const pager::ModelFile& source) : buffer_(resident_bytes(file)) {
  uint64_t at = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (!resident(t)) continue;
    const uint64_t start = pager::align_down(t.offset), length = region_bytes(t);
    uint8_t* dest = buffer_.data() + at;
    source.read_aligned(start, length, dest, t.offset + t.bytes - start);
    weights_.add(t.name, dest + (t.offset - start));
    at += length;
  }
}

}  // namespace epq::runtime
