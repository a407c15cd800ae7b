#include "models/expert_layout.h"

#include <string>

#include "util/error.h"

namespace epq::models {

std::string expert_tensor_name(int layer, int part) {
  const char* names[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
  return "blk." + std::to_string(layer) + "." + names[part] + ".weight";
}

ExpertLayout read_expert_layout(const gguf::File& file, int layer, int64_t n_embd) {
  ExpertLayout l;
  ExpertPart* parts[3] = {&l.gate, &l.up, &l.down};
  for (int i = 0; i < 3; ++i) {
    const std::string name = expert_tensor_name(layer, i);
    const gguf::TensorInfo* t = file.find_tensor(name);
    if (t == nullptr) fail("{}: missing tensor '{}'", file.path(), name);
    if (t->dims.size() != 3 || t->dims[0] == 0 || t->dims[1] == 0 || t->dims[2] == 0) {
      fail("{}: tensor '{}' has shape {}, expected 3 non-zero dimensions", file.path(), name, t->shape_string());
    }
    if (!quant::info(t->type).supported) {
      fail("{}: tensor '{}' has type {}, which EPQ does not support (supported: {})", file.path(), name,
           quant::name(t->type), quant::supported_type_names());
    }
    *parts[i] = {t->type, t->dims[1], t->dims[0], t->shard, t->offset, t->bytes / static_cast<uint64_t>(t->dims[2])};
    if (i == 0) l.n_expert = static_cast<int>(t->dims[2]);
    if (t->dims[2] != l.n_expert) fail("{}: tensor '{}' has {} experts, expected {}", file.path(), name, t->dims[2], l.n_expert);
  }
  const int64_t n_ff = l.gate.rows;
  auto expect = [&](const ExpertPart& p, const char* name, int64_t cols, int64_t rows) {
    if (p.cols != cols || p.rows != rows) {
      fail("{}: tensor 'blk.{}.{}.weight' has shape [{}, {}, {}], expected [{}, {}, {}]", file.path(), layer, name,
           p.cols, p.rows, l.n_expert, cols, rows, l.n_expert);
    }
  };
  expect(l.gate, "ffn_gate_exps", n_embd, n_ff);
  expect(l.up, "ffn_up_exps", n_embd, n_ff);
  expect(l.down, "ffn_down_exps", n_ff, n_embd);
  return l;
}

}  // namespace epq::models
