// Every SIMD dot kernel (AVX2, AVX-512 where the CPU has it, and AVX-512 emulated) against
// the scalar reference, for every type: random data, random block bytes (all code
// patterns), zero scales, saturated codes, activations all +-127, 1..8 columns and odd row counts; a row's result
// independent of the rows beside it, a column's of the column count. The float kernels
// also bit for bit against their documented summation order. Also: the SIMD activation
// quantizer matches its scalar twin exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "quant/activation.h"
#include "quant/blocks.h"
#include "quant/cpu_features.h"
#include "quant/dot.h"
#include "quant/float_bits.h"
#include "quant/reference.h"
#include "quant/rows4_layout.h"

namespace epq::quant {
namespace {

const Type kTypes[] = {Type::F32, Type::F16, Type::BF16, Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::Q8_0,
                       Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K, Type::Q8_K, Type::IQ4_NL, Type::IQ4_XS,
                       Type::MXFP4};

enum class Fill { kQuantized, kRandomBytes, kZeroScale, kMaxCodes };

// Block fields that hold F16 scales, as byte offsets within the block; random bytes there
// would make NaN/Inf, so they are set to sane values instead.
std::vector<int> f16_fields(Type t) {
  switch (t) {
    case Type::Q4_0: case Type::Q5_0: case Type::Q8_0: case Type::IQ4_NL: case Type::IQ4_XS: return {0};
    case Type::Q4_1: case Type::Q5_1: case Type::Q4_K: case Type::Q5_K: return {0, 2};
    case Type::Q2_K: return {80, 82};
    case Type::Q3_K: return {108};
    case Type::Q6_K: return {208};
    default: return {};
  }
}

std::vector<uint8_t> make_row(Type t, int64_t n, Fill fill, std::mt19937& rng) {
  const TypeInfo& ti = info(t);
  std::vector<uint8_t> row(static_cast<size_t>(row_bytes(t, n)));
  std::normal_distribution<float> normal(0, 1);
  if (fill == Fill::kQuantized || ti.block_elems == 1) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = normal(rng);
    quantize_row(t, x.data(), row.data(), n);
    return row;
  }
  for (uint8_t& b : row) b = fill == Fill::kMaxCodes ? 0xFF : static_cast<uint8_t>(rng());
  for (int64_t blk = 0; blk < n / ti.block_elems; ++blk) {
    uint8_t* p = row.data() + blk * ti.block_bytes;
    for (int off : f16_fields(t)) {
      uint16_t h = fill == Fill::kZeroScale ? 0 : f32_to_f16(std::ldexp(1.0f + static_cast<float>(rng() % 100) / 100, -4 - static_cast<int>(rng() % 4)));
      std::memcpy(p + off, &h, 2);
    }
    if (t == Type::Q8_K) {
      float d = fill == Fill::kZeroScale ? 0.0f : 0.01f;
      std::memcpy(p, &d, 4);
    }
    if (t == Type::MXFP4) {  // one block in seven with the tiny exponents 0-2, which decode differently
      p[0] = fill == Fill::kZeroScale ? 0 : static_cast<uint8_t>(blk % 7 == 3 ? blk % 3 : 120 + rng() % 10);
    }
    if (t == Type::Q8_0 || t == Type::Q8_K) {  // -128 is not a code the formats produce
      for (int i = (t == Type::Q8_0 ? 2 : 4); i < (t == Type::Q8_0 ? 34 : 260); ++i) {
        if (p[i] == 0x80) p[i] = 0x81;
      }
    }
  }
  return row;
}

struct Case {
  Type type;
  const char* set_name;
  const KernelSet* set;
};

// rel_tol: the allowed error relative to the sum of |products|.
void check(const KernelSet& simd, Type t, Fill fill, int64_t n, int n_rows, uint32_t seed, double rel_tol = 2e-6) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  const ActFormat f = activation_format(t);
  const size_t act_bytes = activation_bytes(f, n);
  std::vector<uint8_t> acts(act_bytes * kMaxCols);
  for (int c = 0; c < kMaxCols; ++c) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = normal(rng) * (c == 3 ? 100.0f : 1.0f);
    if (c == 2) x.assign(x.size(), 0.0f);  // an all-zero activation
    // Every code +127 or -127: the largest integer sums a kernel may hold before it widens them.
    if (c == 5 || c == 6) x.assign(x.size(), c == 5 ? 1.0f : -1.0f);
    quantize_activation(f, x.data(), acts.data() + c * act_bytes, n);
  }
  // The rows side by side, as in a matrix.
  const size_t row_size = static_cast<size_t>(row_bytes(t, n));
  std::vector<uint8_t> rows(row_size * static_cast<size_t>(n_rows));
  for (int r = 0; r < n_rows; ++r) {
    const std::vector<uint8_t> row = make_row(t, n, fill, rng);
    std::memcpy(rows.data() + row_size * static_cast<size_t>(r), row.data(), row_size);
  }
  const size_t out_stride = static_cast<size_t>(n_rows);
  // All columns at once: a column's result must not depend on how many others share the
  // call, one alone included (a token's numbers must not depend on its batch).
  std::vector<float> widest(out_stride * kMaxCols);
  dot_kernel(simd, t)(n, rows.data(), row_size, n_rows, acts.data(), act_bytes, kMaxCols, widest.data(), out_stride);
  for (int cols = 1; cols <= kMaxCols; ++cols) {
    std::vector<float> expect(out_stride * kMaxCols), got(expect.size()), alone(expect.size());
    dot_kernel(scalar_kernels(), t)(n, rows.data(), row_size, n_rows, acts.data(), act_bytes, cols, expect.data(), out_stride);
    dot_kernel(simd, t)(n, rows.data(), row_size, n_rows, acts.data(), act_bytes, cols, got.data(), out_stride);
    for (int r = 0; r < n_rows; ++r) {
      dot_kernel(simd, t)(n, rows.data() + row_size * static_cast<size_t>(r), row_size, 1, acts.data(), act_bytes, cols,
                          alone.data() + r, out_stride);
    }
    // Tolerance: float rounding relative to the sum of |products|.
    std::vector<float> w(static_cast<size_t>(n)), a(static_cast<size_t>(n));
    for (int r = 0; r < n_rows; ++r) {
      dequantize_row(t, rows.data() + row_size * static_cast<size_t>(r), w.data(), n);
      for (int c = 0; c < cols; ++c) {
        const size_t i = static_cast<size_t>(c) * out_stride + static_cast<size_t>(r);
        dequantize_activation(f, acts.data() + c * act_bytes, a.data(), n);
        double magnitude = 0;
        for (int64_t k = 0; k < n; ++k) magnitude += std::fabs(double{w[k]} * a[k]);
        const std::string where = std::string(simd.name) + " " + name(t) + " fill " + std::to_string(static_cast<int>(fill)) +
                                  " n " + std::to_string(n) + " row " + std::to_string(r) + " cols " + std::to_string(cols) +
                                  " col " + std::to_string(c);
        ASSERT_NEAR(got[i], expect[i], rel_tol * magnitude + 1e-30) << where;
        ASSERT_EQ(std::memcmp(&got[i], &alone[i], sizeof(float)), 0) << "a row's result depends on the rows beside it: " << where;
        ASSERT_EQ(std::memcmp(&got[i], &widest[i], sizeof(float)), 0) << "a column's result depends on the column count: " << where;
      }
    }
  }
}

class DotKernels : public ::testing::TestWithParam<Case> {};

TEST_P(DotKernels, MatchScalarReference) {
  const Case p = GetParam();
  ASSERT_NE(p.set, nullptr) << "this CPU cannot run these kernels";
  const int64_t block = info(p.type).block_elems == 1 ? 1 : info(p.type).block_elems;
  // 13, 14 and 15 blocks: every remainder of the 2, 4 or 8 that kernels group blocks or rows by.
  const int64_t lengths[] = {block == 1 ? 7 : block, 256 * 3, 2048, block == 1 ? 1001 : 256 * 11, block == 1 ? 4103 : block * 13,
                             block == 1 ? 4102 : block * 14, block == 1 ? 4101 : block * 15};
  uint32_t seed = 1;
  for (Fill fill : {Fill::kQuantized, Fill::kRandomBytes, Fill::kZeroScale, Fill::kMaxCodes}) {
    for (int64_t n : lengths) check(*p.set, p.type, fill, n, 5, seed++);
  }
  // Rows longer than a kernel's window of prepared columns (256 blocks with 8 columns; 409
  // and 341, odd, with 5 and 6), in more than one tile of rows. A lane adds one float term
  // per block, 420 in turn, so the tolerance is the bound of such a sum, 420 x 2^-24 of the
  // sum of |terms| (AVX-512 Q4_1 with activations all +127 comes within 2.6e-6).
  if (block == 32) check(*p.set, p.type, Fill::kQuantized, 32 * 420, 37, seed++, 420 * 0x1p-24);
  // The 256-element formats in prompts take sixteen rows at a time where the set has such a
  // kernel (AVX-512 Q4_K and Q5_K from four columns): 37 rows, two groups of sixteen and
  // five rows for the four-row kernel, whose bits a row alone and 1-3 columns check.
  if (block == 256) {
    for (Fill fill : {Fill::kQuantized, Fill::kRandomBytes, Fill::kMaxCodes}) check(*p.set, p.type, fill, 256 * 5, 37, seed++);
  }
  // The float kernels take one column in groups of up to eight rows: 37 rows, four groups
  // and five alone.
  if (block == 1) check(*p.set, p.type, Fill::kQuantized, 4103, 37, seed++);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (Type t : kTypes) {
    cases.push_back({t, "avx2", avx2_kernels()});
    if (avx512_kernels() != nullptr) cases.push_back({t, "avx512", avx512_kernels()});  // else see NativeAvx512 below
    // The AVX-512 kernels' code carried out by SIMDe: checks them on CPUs without AVX-512.
    cases.push_back({t, "avx512_emulated", &avx512_kernels_emulated(Avx512Set::kFullWidth)});
  }
  return cases;
}

#if defined(__GNUC__) && !defined(__clang__)
// Our CPUID reading against libgcc's (which knows every feature name we need).
TEST(CpuFeatures, AgreeWithLibgcc) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(f.avx2, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"));
  EXPECT_EQ(f.avx512_vnni, __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                               __builtin_cpu_supports("avx512vnni"));
  EXPECT_TRUE(f.avx2) << "the binary is built for x86-64-v3; it would not have started";
  EXPECT_EQ(f.amd_family != 0, __builtin_cpu_is("amd"));
  // The family against the kernel's reading of the same CPUID fields.
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (f.amd_family != 0 && line.rfind("cpu family", 0) == 0) {
      EXPECT_EQ(f.amd_family, std::stoi(line.substr(line.find(':') + 1))) << line;
      break;
    }
  }
}
#endif

TEST(NativeAvx512, ChosenAndEqualToTheEmulatedBuild) {
  if (avx512_kernels() == nullptr) {
    GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/VL/DQ/VNNI: the avx512_* kernel cases are not instantiated; "
                    "avx512_emulated_* run the same code through SIMDe";
  }
  if (std::getenv("EPQ_KERNELS") == nullptr) {
    EXPECT_EQ(&active_kernels(), avx512_kernels()) << "AVX-512 available but not chosen";
  }
  // SIMDe carries out each instruction exactly, so the emulated build must agree bit for bit.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 1);
  const int64_t n = 2048;
  const int n_rows = 5;
  for (Type t : kTypes) {
    const ActFormat f = activation_format(t);
    std::vector<uint8_t> acts(activation_bytes(f, n) * kMaxCols), rows;
    std::vector<float> x(static_cast<size_t>(n));
    for (int c = 0; c < kMaxCols; ++c) {
      for (float& v : x) v = normal(rng);
      quantize_activation(f, x.data(), acts.data() + c * activation_bytes(f, n), n);
    }
    for (int r = 0; r < n_rows; ++r) {
      const std::vector<uint8_t> row = make_row(t, n, Fill::kRandomBytes, rng);
      rows.insert(rows.end(), row.begin(), row.end());
    }
    for (int cols = 1; cols <= kMaxCols; ++cols) {
      std::vector<float> native(n_rows * kMaxCols), emulated(native.size());
      for (auto [set, out] : {std::pair{avx512_kernels(), &native}, std::pair{&avx512_kernels_emulated(Avx512Set::kFullWidth), &emulated}}) {
        dot_kernel(*set, t)(n, rows.data(), row_bytes(t, n), n_rows, acts.data(), activation_bytes(f, n), cols, out->data(), n_rows);
      }
      EXPECT_EQ(std::memcmp(native.data(), emulated.data(), native.size() * sizeof(float)), 0) << name(t) << " cols " << cols;
    }
  }
}

// The float kernels' summation order (DotFloat in quant/kernel_common.h), in scalar code:
// lane j of 16 takes the products of elements 16k + j with one FMA each (BF16: of elements
// 32k + 2j and then 32k + 2j + 1); then lanes 0-7 plus lanes 8-15, summed as hsum does;
// then the n % 16 (BF16: n % 32) last products one by one.
float float_dot_in_kernel_order(Type t, const float* w, const float* a, int64_t n) {
  const bool pairs = t == Type::BF16;
  const int64_t step = pairs ? 32 : 16;
  float lane[16] = {};
  int64_t i = 0;
  for (; i + step <= n; i += step) {
    for (int j = 0; j < 16; ++j) {
      if (pairs) {
        lane[j] = std::fma(w[i + 2 * j], a[i + 2 * j], lane[j]);
        lane[j] = std::fma(w[i + 2 * j + 1], a[i + 2 * j + 1], lane[j]);
      } else {
        lane[j] = std::fma(w[i + j], a[i + j], lane[j]);
      }
    }
  }
  float v[8];
  for (int j = 0; j < 8; ++j) v[j] = lane[j] + lane[j + 8];
  float s = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
  for (; i < n; ++i) s += w[i] * a[i];
  return s;
}

// F32, F16 and BF16 kernels of every set give exactly the bits of that order, for any row
// grouping (odd row counts) and column count: the AVX2 and AVX-512 kernels agree with each
// other and with the kernels before rows were grouped.
TEST(FloatKernels, SumInTheDocumentedOrder) {
  std::vector<const KernelSet*> sets = {avx2_kernels(), &avx512_kernels_emulated(Avx512Set::kFullWidth)};
  if (avx512_kernels() != nullptr) sets.push_back(avx512_kernels());
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  for (Type t : {Type::F32, Type::F16, Type::BF16}) {
    const ActFormat f = activation_format(t);
    for (int64_t n : {7, 16, 40, 1001, 4096, 4103}) {
      const int n_rows = 7;
      const size_t row_size = static_cast<size_t>(row_bytes(t, n));
      std::vector<uint8_t> rows;
      for (int r = 0; r < n_rows; ++r) {
        const std::vector<uint8_t> row = make_row(t, n, Fill::kQuantized, rng);
        rows.insert(rows.end(), row.begin(), row.end());
      }
      const size_t act_bytes = activation_bytes(f, n);
      std::vector<uint8_t> acts(act_bytes * kMaxCols);
      std::vector<float> x(static_cast<size_t>(n)), w(static_cast<size_t>(n)), a(static_cast<size_t>(n));
      for (int c = 0; c < kMaxCols; ++c) {
        for (float& v : x) v = normal(rng);
        quantize_activation(f, x.data(), acts.data() + c * act_bytes, n);
      }
      std::vector<float> expect(static_cast<size_t>(n_rows) * kMaxCols);
      for (int r = 0; r < n_rows; ++r) {
        dequantize_row(t, rows.data() + row_size * static_cast<size_t>(r), w.data(), n);
        for (int c = 0; c < kMaxCols; ++c) {
          dequantize_activation(f, acts.data() + c * act_bytes, a.data(), n);
          expect[static_cast<size_t>(c * n_rows + r)] = float_dot_in_kernel_order(t, w.data(), a.data(), n);
        }
      }
      for (const KernelSet* set : sets) {
        for (int cols = 1; cols <= kMaxCols; ++cols) {
          std::vector<float> got(expect.size());
          dot_kernel(*set, t)(n, rows.data(), row_size, n_rows, acts.data(), act_bytes, cols, got.data(), n_rows);
          for (size_t i = 0; i < static_cast<size_t>(cols * n_rows); ++i) {
            ASSERT_EQ(std::memcmp(&got[i], &expect[i], sizeof(float)), 0)
                << set->name << " " << name(t) << " n " << n << " cols " << cols << " out " << i << ": " << got[i] << " vs " << expect[i];
          }
        }
      }
    }
  }
}

// n_rows rows of type t side by side, and kMaxCols activation columns for them (column 1
// a thousand times larger than the others).
struct Operands {
  size_t row_size, act_bytes;
  std::vector<uint8_t> rows, acts;
};
Operands random_operands(Type t, Fill fill, int64_t n, int n_rows, std::mt19937& rng) {
  const ActFormat f = activation_format(t);
  Operands o{static_cast<size_t>(row_bytes(t, n)), activation_bytes(f, n), {}, {}};
  o.acts.resize(o.act_bytes * kMaxCols);
  for (int r = 0; r < n_rows; ++r) {
    const std::vector<uint8_t> row = make_row(t, n, fill, rng);
    o.rows.insert(o.rows.end(), row.begin(), row.end());
  }
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(static_cast<size_t>(n));
  for (int c = 0; c < kMaxCols; ++c) {
    for (float& v : x) v = normal(rng) * (c == 1 ? 1000.0f : 1.0f);
    quantize_activation(f, x.data(), o.acts.data() + c * o.act_bytes, n);
  }
  return o;
}

// The AVX-512 kernels for Q6_K (four rows per register, and sixteen for prompts) promise
// the AVX2 kernel's bits exactly (quant/dot_avx512.cpp): the same integers and the same
// float operations after them. Every row count up to 37 and column count: groups of
// sixteen and of four, and the rows after them. (Q4_K and Q5_K have bits of their own
// there, the same for any rows and columns: MatchScalarReference.)
TEST(SameBitsAsAvx2, Q6K) {
  std::vector<const KernelSet*> sets = {&avx512_kernels_emulated(Avx512Set::kFullWidth)};
  if (avx512_kernels() != nullptr) sets.push_back(avx512_kernels());
  std::mt19937 rng(9);
  for (Type t : {Type::Q6_K}) {
    for (Fill fill : {Fill::kQuantized, Fill::kRandomBytes, Fill::kMaxCodes}) {
      const int64_t n = 256 * 5;
      const int n_rows = 37;
      const auto [row_size, act_bytes, rows, acts] = random_operands(t, fill, n, n_rows, rng);
      for (int rows_in_call = 1; rows_in_call <= n_rows; ++rows_in_call) {
        for (int cols = 1; cols <= kMaxCols; ++cols) {
          std::vector<float> expect(static_cast<size_t>(rows_in_call * cols)), got(expect.size());
          dot_kernel(*avx2_kernels(), t)(n, rows.data(), row_size, rows_in_call, acts.data(), act_bytes, cols, expect.data(), rows_in_call);
          for (const KernelSet* set : sets) {
            dot_kernel(*set, t)(n, rows.data(), row_size, rows_in_call, acts.data(), act_bytes, cols, got.data(), rows_in_call);
            ASSERT_EQ(std::memcmp(got.data(), expect.data(), got.size() * sizeof(float)), 0)
                << set->name << " " << name(t) << " fill " << static_cast<int>(fill) << " rows " << rows_in_call << " cols " << cols;
          }
        }
      }
    }
  }
}

// The four-row layout (quant/rows4_layout.h): field f of row i of block b of a group at
// b * 4 * block_bytes + 4 * (f's offset) + i * (f's size); the rows after the groups as they were.
TEST(Rows4Layout, FieldsOfFourRowsSideBySide) {
  struct Field {
    size_t offset, size;
  };
  const std::pair<Type, std::vector<Field>> layouts[] = {
      {Type::Q4_0, {{0, 2}, {2, 16}}},         {Type::IQ4_NL, {{0, 2}, {2, 16}}},       {Type::Q4_1, {{0, 2}, {2, 2}, {4, 16}}},
      {Type::Q5_0, {{0, 2}, {2, 4}, {6, 16}}}, {Type::Q5_1, {{0, 2}, {2, 2}, {4, 4}, {8, 16}}}, {Type::MXFP4, {{0, 1}, {1, 16}}},
      {Type::Q8_0, {{0, 2}, {2, 32}}},
      // IQ4_XS's code field in 32-byte pieces.
      {Type::IQ4_XS, {{0, 2}, {2, 2}, {4, 4}, {8, 32}, {40, 32}, {72, 32}, {104, 32}}}};
  std::mt19937 rng(5);
  for (const auto& [t, fields] : layouts) {
    ASSERT_TRUE(has_rows4_layout(t, 4)) << name(t);
    size_t field_bytes = 0;
    for (const Field& f : fields) field_bytes += f.size;
    ASSERT_EQ(field_bytes, static_cast<size_t>(info(t).block_bytes)) << name(t);
    const int64_t n = info(t).block_elems * 3, rows = 10;
    const size_t block = static_cast<size_t>(info(t).block_bytes), row_size = static_cast<size_t>(row_bytes(t, n));
    std::vector<uint8_t> file(row_size * rows);
    for (uint8_t& b : file) b = static_cast<uint8_t>(rng());
    std::vector<uint8_t> packed = file;
    to_rows4_layout(t, packed.data(), rows, n, avx512_kernels_emulated(Avx512Set::kFullWidth));
    for (size_t g = 0; g < 2; ++g) {
      for (size_t b = 0; b < 3; ++b) {
        for (const Field& f : fields) {
          for (size_t i = 0; i < 4; ++i) {
            const uint8_t* want = file.data() + (4 * g + i) * row_size + b * block + f.offset;
            const uint8_t* got = packed.data() + 4 * g * row_size + b * 4 * block + 4 * f.offset + i * f.size;
            ASSERT_EQ(std::memcmp(got, want, f.size), 0) << name(t) << " group " << g << " block " << b << " row " << i << " field at " << f.offset;
          }
        }
      }
    }
    EXPECT_EQ(std::memcmp(packed.data() + 8 * row_size, file.data() + 8 * row_size, 2 * row_size), 0) << name(t) << ": rows after the groups";
  }
  // The K formats only in sixteen-row groups.
  for (Type t : {Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K}) EXPECT_FALSE(has_rows4_layout(t, 4)) << name(t);
}

// The sixteen-row variant (quant/rows4_layout.h): the 2- or 4-byte piece at byte o of row
// i's block b of a group at b * 16 * block_bytes + 16 * o + i * (piece size); 2-byte pieces
// for the F16 fields (Q4_K's and Q5_K's d and dmin, the first 4 bytes; Q2_K's d and dmin,
// the last 4; Q3_K's and Q6_K's d, the last 2), 4-byte ones for the rest; the rows after
// the groups as they were.
TEST(Rows4Layout, PiecesOfSixteenRowsSideBySide) {
  std::mt19937 rng(6);
  for (Type t : {Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K}) {
    ASSERT_TRUE(has_rows4_layout(t, 16)) << name(t);
    const KernelSet& set = avx512_kernels_emulated(Avx512Set::kSplitUnits);
    ASSERT_EQ(set.group_rows[static_cast<uint32_t>(t)], 16) << name(t);
    const int64_t n = info(t).block_elems * 3, rows = 37;
    const size_t block = static_cast<size_t>(info(t).block_bytes), row_size = static_cast<size_t>(row_bytes(t, n));
    std::vector<uint8_t> file(row_size * rows);
    for (uint8_t& b : file) b = static_cast<uint8_t>(rng());
    std::vector<uint8_t> packed = file;
    to_rows4_layout(t, packed.data(), rows, n, set);
    for (size_t g = 0; g < 2; ++g) {
      for (size_t b = 0; b < 3; ++b) {
        for (size_t o = 0; o < block;) {
          const bool f16 = t == Type::Q2_K ? o >= block - 4 : t == Type::Q3_K || t == Type::Q6_K ? o >= block - 2 : o < 4;
          const size_t piece = f16 ? 2 : 4;
          for (size_t i = 0; i < 16; ++i) {
            const uint8_t* want = file.data() + (16 * g + i) * row_size + b * block + o;
            const uint8_t* got = packed.data() + 16 * g * row_size + b * 16 * block + 16 * o + i * piece;
            ASSERT_EQ(std::memcmp(got, want, piece), 0) << name(t) << " group " << g << " block " << b << " row " << i << " byte " << o;
          }
          o += piece;
        }
      }
    }
    EXPECT_EQ(std::memcmp(packed.data() + 32 * row_size, file.data() + 32 * row_size, 5 * row_size), 0) << name(t) << ": rows after the groups";
  }
}

// Which matrices are rearranged: where the kernel set reads the layout, and for the row
// lengths it takes in it: Q8_0 and IQ4_XS only rows shorter than kLongRowCols (their file
// layout is faster for long rows); Q4_0's long rows only with full-width 512-bit units
// (the set `avx512-full-width`, Zen 5 and Intel); the other 32-element formats' rows and
// the K formats' (in sixteen-row groups) of any length.
TEST(Rows4Layout, UsedWhereTheKernelsReadItForTheRowLengthsTheSetTakes) {
  const bool avx512 = dot_kernel_rows4(active_kernels(), Type::Q4_0) != nullptr;
  const bool full_width = std::string(active_kernels().name) == "avx512-full-width";
  EXPECT_EQ(use_rows4_layout(Type::Q4_0, 768), avx512);
  EXPECT_EQ(use_rows4_layout(Type::Q4_0, kLongRowCols - 32), avx512);
  EXPECT_EQ(use_rows4_layout(Type::Q4_0, 4096), avx512 && full_width);
  for (Type t : {Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::IQ4_NL, Type::MXFP4}) EXPECT_EQ(use_rows4_layout(t, 4096), avx512) << name(t);
  for (Type t : {Type::Q8_0, Type::IQ4_XS}) {
    EXPECT_EQ(use_rows4_layout(t, 768), avx512) << name(t);
    EXPECT_EQ(use_rows4_layout(t, kLongRowCols - 256), avx512) << name(t);
    EXPECT_FALSE(use_rows4_layout(t, kLongRowCols)) << name(t);
    EXPECT_FALSE(use_rows4_layout(t, 4096)) << name(t);
  }
  for (Type t : {Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K}) {
    for (int64_t cols : {768, 4096}) EXPECT_EQ(use_rows4_layout(t, cols), avx512) << name(t) << " " << cols;
    if (avx512) {
      EXPECT_EQ(active_kernels().group_rows[static_cast<uint32_t>(t)], 16) << name(t);
    }
  }
  const KernelSet* avx2 = avx2_kernels();
  if (avx2 != nullptr) {
    EXPECT_EQ(dot_kernel_rows4(*avx2, Type::Q4_0), nullptr);
    EXPECT_EQ(dot_kernel_rows4(*avx2, Type::Q4_K), nullptr);
  }
}

// A kernel for the four-row layout gives, row for row, the bits of its set's kernel for the
// file layout (itself checked against the scalar reference above): every row count, so
// full groups (of four and of sixteen) and the rows after them, calls that start at a
// later group, 1-8 columns, and rows longer than the prepared window.
TEST(Rows4Layout, SameBitsAsTheFileLayout) {
  std::vector<const KernelSet*> sets = {&avx512_kernels_emulated(Avx512Set::kFullWidth), &avx512_kernels_emulated(Avx512Set::kSplitUnits)};
  if (avx512_kernels() != nullptr) sets.push_back(avx512_kernels());
  std::mt19937 rng(13);
  int checked = 0;
  for (Type t : kTypes) {
    if (!has_rows4_layout(t, 4) && !has_rows4_layout(t, 16)) continue;
    for (Fill fill : {Fill::kQuantized, Fill::kRandomBytes, Fill::kMaxCodes}) {
      // For the 32-element formats also rows longer than their kernels' prepared window.
      for (const int64_t n : {info(t).block_elems * 13, int64_t{32 * 420}}) {
        if (n % info(t).block_elems != 0) continue;
        // The 256-element formats up to 37 rows: prompts take sixteen at a time (Q4_K-Q6_K).
        const int n_rows = info(t).block_elems == 256 ? 37 : 15;
        const auto [row_size, act_bytes, rows, acts] = random_operands(t, fill, n, n_rows, rng);
        for (const KernelSet* set : sets) {
          ASSERT_NE(dot_kernel_rows4(*set, t), nullptr) << set->name << " " << name(t);
          const int group_rows = set->group_rows[static_cast<uint32_t>(t)];
          // The emulated sets' four-row layout kernels are the same.
          if (set == sets[1] && group_rows == 4) continue;
          for (int first_group = 0; first_group <= 1; ++first_group) {
            for (int in_call = 1; in_call <= n_rows - group_rows * first_group; ++in_call) {
              // The rows of the call as a matrix of its own: its groups rearranged, the rest as they were.
              const uint8_t* file = rows.data() + static_cast<size_t>(group_rows * first_group) * row_size;
              std::vector<uint8_t> packed(file, file + static_cast<size_t>(in_call) * row_size);
              to_rows4_layout(t, packed.data(), in_call, n, *set);
              for (int cols = 1; cols <= kMaxCols; ++cols) {
                std::vector<float> expect(static_cast<size_t>(in_call * cols)), got(expect.size());
                dot_kernel(*set, t)(n, file, row_size, in_call, acts.data(), act_bytes, cols, expect.data(), in_call);
                dot_kernel_rows4(*set, t)(n, packed.data(), row_size, in_call, acts.data(), act_bytes, cols, got.data(), in_call);
                ASSERT_EQ(std::memcmp(got.data(), expect.data(), got.size() * sizeof(float)), 0)
                    << set->name << " " << name(t) << " fill " << static_cast<int>(fill) << " n " << n << " rows " << in_call << " cols " << cols;
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Simd, DotKernels, ::testing::ValuesIn(all_cases()), [](const auto& p) {
  return std::string(p.param.set_name) + "_" + name(p.param.type);
});

// BF16 activations: each whole block of 32 as its even elements, then its odd ones (the
// order DotFloat reads pairs of BF16 weights in); the n % 32 last in order; and back.
TEST(ActivationQuantizer, Bf16BlocksEvenElementsFirst) {
  const int64_t n = 70;  // two blocks and six more
  std::vector<float> x(n), stored(n), back(n);
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);  // BF16 holds these exactly
  quantize_activation(ActFormat::kBF16, x.data(), stored.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t block = i / 32 * 32, j = i % 32;
    const float expect = i >= 64 ? static_cast<float>(i) : static_cast<float>(block + (j < 16 ? 2 * j : 2 * (j - 16) + 1));
    EXPECT_EQ(stored[static_cast<size_t>(i)], expect) << "element " << i;
  }
  dequantize_activation(ActFormat::kBF16, stored.data(), back.data(), n);
  EXPECT_EQ(back, x);
}

TEST(ActivationQuantizer, SimdMatchesScalarBitForBit) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 1);
  for (ActFormat f : {ActFormat::kQ8x32, ActFormat::kQ8K, ActFormat::kF16, ActFormat::kBF16}) {
    for (int64_t n : {256, 2048, 4096}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = normal(rng) * 3;
      x[17] = 0.5f;  // exact ties appear after scaling for some inputs; keep a variety
      for (int i = 256; i < 512 && i < n; ++i) x[static_cast<size_t>(i)] = 0;
      std::vector<uint8_t> a(activation_bytes(f, n)), b(a.size());
      quantize_activation(f, x.data(), a.data(), n);
      quantize_activation_reference(f, x.data(), b.data(), n);
      EXPECT_EQ(a, b) << static_cast<int>(f) << " n=" << n;
      std::vector<float> y(static_cast<size_t>(n));
      dequantize_activation(f, a.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i], 3 * 4.5 / 127);
    }
  }
}

}  // namespace
}  // namespace epq::quant
