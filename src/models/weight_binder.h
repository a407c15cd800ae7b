#pragma once
// Binds an architecture's resident tensors by name, checking each one's presence, shape
// and type against what the graph will read, so a malformed file fails at load with one
// line naming the tensor.
#include <cstdint>
#include <string>
#include <vector>

#include "core/matrix.h"
#include "gguf/file.h"
#include "models/resident_weights.h"

namespace epq::models {

// The tensor `name` must exist with shape [cols, rows] (ggml order: cols contiguous).
const gguf::TensorInfo& matrix_tensor(const gguf::File& file, const std::string& name, int64_t cols, int64_t rows);

// "blk.<layer>.<what>.weight"
std::string layer_tensor(int layer, const char* what);

class WeightBinder {
 public:
  WeightBinder(const gguf::File& file, const ResidentWeights& weights) : f_(file), w_(weights) {}

  // A [cols, rows] matrix of a supported type.
  Matrix matrix(const std::string& name, int64_t cols, int64_t rows) const;
  // The n matrices of a [cols, rows, n] tensor (e.g. MLA's per-head k_b and v_b).
  std::vector<Matrix> stacked(const std::string& name, int64_t cols, int64_t rows, int64_t n) const;
  // An F32 vector of n elements (norm weights, biases, gate vectors).
  const float* vector(const std::string& name, int64_t n) const;
  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  // In the file and loaded (a paged run loads only the tensors of the layers it runs).
  bool loaded(const std::string& name) const { return has(name) && w_.has(name); }
  const gguf::File& file() const { return f_; }

 private:
  const gguf::File& f_;
  const ResidentWeights& w_;
};

}  // namespace epq::models
