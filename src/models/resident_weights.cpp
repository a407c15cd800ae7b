#include "models/resident_weights.h"

#include "util/error.h"

namespace epq::models {

const uint8_t* ResidentWeights::get(const gguf::File& file, const std::string& name) const {
  auto it = data_.find(name);
  if (it == data_.end()) fail("{}: missing tensor '{}'", file.path(), name);
  return it->second.bytes;
}

ResidentWeights ResidentWeights::from_mapping(const gguf::File& file) {
  ResidentWeights w;
  for (const gguf::TensorInfo& t : file.tensors()) w.add(t.name, file.tensor_data(t).data());
  return w;
}

}  // namespace epq::models
