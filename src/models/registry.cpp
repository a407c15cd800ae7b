// The architecture registry: general.architecture -> reader of its shape and loader.
#include <fmt/format.h>

#include "models/model.h"
#include "models/qwen3moe.h"
#include "util/error.h"

namespace epq::models {
namespace {

struct Architecture {
  const char* name;
  ModelInfo (*info)(const gguf::File&, const ModelOptions&);
  std::unique_ptr<Model> (*load)(const gguf::File&, const ResidentWeights&, const ModelOptions&);
};

const Architecture kArchitectures[] = {
    {"qwen3moe", qwen3moe_info, load_qwen3moe},
};

const Architecture& find(const gguf::File& file) {
  const std::string arch = file.get_string("general.architecture");
  for (const Architecture& a : kArchitectures) {
    if (arch == a.name) return a;
  }
  fail("{}: unsupported architecture '{}' (supported: {})", file.path(), arch, fmt::join(supported_architectures(), ", "));
}

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> out;
  for (const Architecture& a : kArchitectures) out.emplace_back(a.name);
  return out;
}

ModelInfo read_model_info(const gguf::File& file, const ModelOptions& options) { return find(file).info(file, options); }

std::unique_ptr<Model> load_model(const gguf::File& file, const ResidentWeights& weights, const ModelOptions& options) {
  return find(file).load(file, weights, options);
}

}  // namespace epq::models
