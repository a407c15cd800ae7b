#pragma once
// The tensor types of the GGUF format (ggml_type ids), their block geometry, and which
// of them EPQ can compute with. Ids and sizes are the file format: never renumber.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace epq::quant {

enum class Type : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct TypeInfo {
  Type type;
  const char* name;
  int64_t block_elems;  // elements per block
  int64_t block_bytes;  // bytes per block
  bool supported;       // EPQ has kernels for it
};

// Info for a raw ggml_type id, or nullptr if the id is not a known type.
const TypeInfo* find_type(uint32_t id);
const TypeInfo& info(Type type);
std::optional<Type> type_from_name(std::string_view name);  // case-insensitive
inline const char* name(Type type) { return info(type).name; }

// Bytes of a row of n elements; n must be a multiple of the block size.
inline int64_t row_bytes(Type type, int64_t n) {
  const TypeInfo& t = info(type);
  return n / t.block_elems * t.block_bytes;
}

// Comma-separated names of the supported types, for error messages and help text.
std::string supported_type_names();

constexpr int64_t kQK = 32;    // block size of the legacy and IQ4_NL/MXFP4 formats
constexpr int64_t kQKK = 256;  // super-block size of the K formats and IQ4_XS

}  // namespace epq::quant
