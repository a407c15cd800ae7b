#pragma once
// The data of a model's tensors, by name: pointers into the mapped file, or into one buffer
// the tensors were read into (runtime/resident_loader.h); routed experts only when the
// whole model is in RAM (models/resident_experts.h).
#include <cstdint>
#include <string>
#include <unordered_map>

#include "gguf/file.h"

namespace epq::models {

class ResidentWeights {
 public:
  // `rows4`: the data are in the four-row layout (quant/rows4_layout.h), not the file's.
  void add(const std::string& name, const uint8_t* data, bool rows4 = false) { data_[name] = {data, rows4}; }
  // Data of a tensor, or an Error naming the file and tensor if it is absent.
  const uint8_t* get(const gguf::File& file, const std::string& name) const;
  bool has(const std::string& name) const { return data_.count(name) != 0; }
  bool rows4(const std::string& name) const {
    auto it = data_.find(name);
    return it != data_.end() && it->second.rows4;
  }

  // Every tensor, pointing into the file's mapping.
  static ResidentWeights from_mapping(const gguf::File& file);

 private:
  struct Data {
    const uint8_t* bytes;
    bool rows4;
  };
  std::unordered_map<std::string, Data> data_;
};

}  // namespace epq::models
