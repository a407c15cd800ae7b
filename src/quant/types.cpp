#include "quant/types.h"

#include <array>
#include <strings.h>

namespace epq::quant {
namespace {

constexpr std::array kTypes = {
    TypeInfo{Type::F32, "F32", 1, 4, true},
    TypeInfo{Type::F16, "F16", 1, 2, true},
    TypeInfo{Type::Q4_0, "Q4_0", 32, 18, true},
    TypeInfo{Type::Q4_1, "Q4_1", 32, 20, true},
    TypeInfo{Type::Q5_0, "Q5_0", 32, 22, true},
    TypeInfo{Type::Q5_1, "Q5_1", 32, 24, true},
    TypeInfo{Type::Q8_0, "Q8_0", 32, 34, true},
    TypeInfo{Type::Q8_1, "Q8_1", 32, 36, false},
    TypeInfo{Type::Q2_K, "Q2_K", 256, 84, true},
    TypeInfo{Type::Q3_K, "Q3_K", 256, 110, true},
    TypeInfo{Type::Q4_K, "Q4_K", 256, 144, true},
    TypeInfo{Type::Q5_K, "Q5_K", 256, 176, true},
    TypeInfo{Type::Q6_K, "Q6_K", 256, 210, true},
    TypeInfo{Type::Q8_K, "Q8_K", 256, 292, true},
    TypeInfo{Type::IQ2_XXS, "IQ2_XXS", 256, 66, false},
    TypeInfo{Type::IQ2_XS, "IQ2_XS", 256, 74, false},
    TypeInfo{Type::IQ3_XXS, "IQ3_XXS", 256, 98, false},
    TypeInfo{Type::IQ1_S, "IQ1_S", 256, 50, false},
    TypeInfo{Type::IQ4_NL, "IQ4_NL", 32, 18, true},
    TypeInfo{Type::IQ3_S, "IQ3_S", 256, 110, false},
    TypeInfo{Type::IQ2_S, "IQ2_S", 256, 82, false},
    TypeInfo{Type::IQ4_XS, "IQ4_XS", 256, 136, true},
    TypeInfo{Type::I8, "I8", 1, 1, false},
    TypeInfo{Type::I16, "I16", 1, 2, false},
    TypeInfo{Type::I32, "I32", 1, 4, false},
    TypeInfo{Type::I64, "I64", 1, 8, false},
    TypeInfo{Type::F64, "F64", 1, 8, false},
    TypeInfo{Type::IQ1_M, "IQ1_M", 256, 56, false},
    TypeInfo{Type::BF16, "BF16", 1, 2, true},
    TypeInfo{Type::TQ1_0, "TQ1_0", 256, 54, false},
    TypeInfo{Type::TQ2_0, "TQ2_0", 256, 66, false},
    TypeInfo{Type::MXFP4, "MXFP4", 32, 17, true},
};

}  // namespace

const TypeInfo* find_type(uint32_t id) {
  for (const TypeInfo& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == id) return &t;
  }
  return nullptr;
}

const TypeInfo& info(Type type) { return *find_type(static_cast<uint32_t>(type)); }

std::optional<Type> type_from_name(std::string_view name) {
  for (const TypeInfo& t : kTypes) {
    if (name.size() == std::char_traits<char>::length(t.name) &&
        strncasecmp(name.data(), t.name, name.size()) == 0) {
      return t.type;
    }
  }
  return std::nullopt;
}

std::string supported_type_names() {
  std::string out;
  for (const TypeInfo& t : kTypes) {
    if (!t.supported) continue;
    if (!out.empty()) out += ", ";
    out += t.name;
  }
  return out;
}

}  // namespace epq::quant
