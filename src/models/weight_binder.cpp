#include "models/weight_binder.h"

#include "util/error.h"

namespace epq::models {

const gguf::TensorInfo& matrix_tensor(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) fail("{}: missing tensor '{}'", f.path(), name);
  if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
    fail("{}: tensor '{}' has shape {}, expected [{}, {}]", f.path(), name, t->shape_string(), cols, rows);
  }
  return *t;
}

std::string layer_tensor(int layer, const char* what) { return "blk." + std::to_string(layer) + "." + what + ".weight"; }

Matrix WeightBinder::matrix(const std::string& name, int64_t cols, int64_t rows) const {
  const gguf::TensorInfo& t = matrix_tensor(f_, name, cols, rows);
  if (!quant::info(t.type).supported) {
    fail("{}: tensor '{}' has type {}, which EPQ does not support (supported: {})", f_.path(), name, quant::name(t.type),
         quant::supported_type_names());
  }
  return {t.type, w_.get(f_, name), rows, cols, t.row_bytes(), w_.rows4(name)};
}

std::vector<Matrix> WeightBinder::stacked(const std::string& name, int64_t cols, int64_t rows, int64_t n) const {
  const gguf::TensorInfo* t = f_.find_tensor(name);
  if (t == nullptr) fail("{}: missing tensor '{}'", f_.path(), name);
  if (t->dims.size() != 3 || t->dims[0] != cols || t->dims[1] != rows || t->dims[2] != n) {
    fail("{}: tensor '{}' has shape {}, expected [{}, {}, {}]", f_.path(), name, t->shape_string(), cols, rows, n);
  }
  if (!quant::info(t->type).supported) {
    fail("{}: tensor '{}' has type {}, which EPQ does not support (supported: {})", f_.path(), name, quant::name(t->type),
         quant::supported_type_names());
  }
  const uint8_t* data = w_.get(f_, name);
  std::vector<Matrix> out;
  for (int64_t i = 0; i < n; ++i) out.push_back({t->type, data + static_cast<size_t>(i * rows) * t->row_bytes(), rows, cols, t->row_bytes()});
  return out;
}

const float* WeightBinder::vector(const std::string& name, int64_t n) const {
  const gguf::TensorInfo* t = f_.find_tensor(name);
  if (t == nullptr) fail("{}: missing tensor '{}'", f_.path(), name);
  if (t->type != quant::Type::F32 || t->dims.size() != 1 || t->dims[0] != n) {
    fail("{}: tensor '{}' is {} {}, expected F32 [{}]", f_.path(), name, quant::name(t->type), t->shape_string(), n);
  }
  return reinterpret_cast<const float*>(w_.get(f_, name));
}

}  // namespace epq::models
