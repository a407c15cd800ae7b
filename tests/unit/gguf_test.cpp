// GGUF reader and writer: a round trip of every value type, and one crafted file for each
// malformation the reader must reject with a clear message.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "temp_path.h"
#include "util/error.h"

namespace epq::gguf {
namespace {

// Builds GGUF bytes by hand, independently of Writer, so each field can be broken.
class RawGguf {
 public:
  template <typename T>
  RawGguf& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
    return *this;
  }
  RawGguf& str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  RawGguf& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return put<uint32_t>(kMagic).put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
  RawGguf& kv_u32(const std::string& key, uint32_t v) { return str(key).put<uint32_t>(4).put<uint32_t>(v); }
  RawGguf& tensor(const std::string& name, std::vector<int64_t> dims, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (int64_t d : dims) put<int64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  RawGguf& pad_to(size_t alignment) {
    while (bytes.size() % alignment) bytes.push_back(0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    bytes.resize(bytes.size() + n);
    return *this;
  }
  std::vector<uint8_t> bytes;
};

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    File::parse(bytes, "crafted.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_REJECTS(bytes, fragment) \
  EXPECT_NE(parse_error(bytes).find(fragment), std::string::npos) << parse_error(bytes)

TEST(GgufReader, AcceptsMinimalFileWithTensor) {
  RawGguf g;
  g.header(1, 1).kv_u32("a.b", 7).tensor("t", {32, 2}, 0, 0).pad_to(32).zeros(256);
  File f = File::parse(g.bytes, "ok.gguf");
  EXPECT_EQ(f.get_int("a.b"), 7);
  ASSERT_NE(f.find_tensor("t"), nullptr);
  EXPECT_EQ(f.find_tensor("t")->bytes, 256u);
  EXPECT_EQ(f.find_tensor("t")->offset, f.shards()[0].data_offset);
  EXPECT_EQ(f.shards()[0].data_offset % 32, 0u);
}

TEST(GgufReader, AcceptsVersion2) {
  RawGguf g;
  g.header(0, 1, 2).kv_u32("x", 1);
  EXPECT_EQ(File::parse(g.bytes, "v2.gguf").version(), 2u);
}

TEST(GgufReader, BadMagic) {
  RawGguf g;
  g.put<uint32_t>(0x12345678).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(0);
  EXPECT_REJECTS(g.bytes, "bad magic");
  const std::vector<uint8_t> short_file = {'G', 'G'};
  EXPECT_REJECTS(short_file, "bad magic");
}

TEST(GgufReader, UnsupportedVersion) {
  RawGguf g;
  g.header(0, 0, 1);
  EXPECT_REJECTS(g.bytes, "unsupported GGUF version 1");
  RawGguf h;
  h.header(0, 0, 4);
  EXPECT_REJECTS(h.bytes, "unsupported GGUF version 4");
  RawGguf big;
  big.header(0, 0, 0x03000000);
  EXPECT_REJECTS(big.bytes, "big-endian");
}

TEST(GgufReader, TruncatedHeader) {
  RawGguf g;
  g.header(0, 2).kv_u32("a-long-enough-key-name", 1);  // the second pair is missing
  EXPECT_REJECTS(g.bytes, "truncated header");
  RawGguf h;
  h.header(0, 1).str("key").put<uint32_t>(4).put<uint16_t>(1);  // uint32 cut short
  EXPECT_REJECTS(h.bytes, "truncated header");
}

TEST(GgufReader, StringLengthPastEnd) {
  RawGguf g;
  g.header(0, 1).put<uint64_t>(1000000).bytes.push_back('k');
  EXPECT_REJECTS(g.bytes, "past the end of the file");
  RawGguf h;
  h.header(0, 1).str("k").put<uint32_t>(8).put<uint64_t>(uint64_t{1} << 62);
  EXPECT_REJECTS(h.bytes, "past the end of the file");
}

TEST(GgufReader, ArrayLengthPastEnd) {
  RawGguf g;
  g.header(0, 1).str("arr").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(uint64_t{1} << 60);
  EXPECT_REJECTS(g.bytes, "claims");
  RawGguf nested;  // an array of arrays whose inner count lies
  nested.header(0, 1).str("arr").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(1).put<uint32_t>(6).put<uint64_t>(99);
  EXPECT_REJECTS(nested.bytes, "claims");
}

TEST(GgufReader, HugeCounts) {
  RawGguf g;
  g.header(0, uint64_t{1} << 62);
  EXPECT_REJECTS(g.bytes, "claims");
  RawGguf h;
  h.header(uint64_t{1} << 62, 0);
  EXPECT_REJECTS(h.bytes, "claims");
}

TEST(GgufReader, UnknownValueType) {
  RawGguf g;
  g.header(0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0);
  EXPECT_REJECTS(g.bytes, "unknown value type 13");
}

TEST(GgufReader, TensorDataOutOfBounds) {
  RawGguf g;
  g.header(1, 0).tensor("t", {32, 4}, 0, 0).pad_to(32).zeros(100);  // needs 512 bytes
  EXPECT_REJECTS(g.bytes, "extends past the end");
  RawGguf h;
  h.header(1, 0).tensor("t", {32}, 0, uint64_t{1} << 63).pad_to(32).zeros(128);
  EXPECT_REJECTS(h.bytes, "extends past the end");
}

TEST(GgufReader, TensorDataOverlapping) {
  RawGguf g;
  g.header(2, 0).tensor("a", {64}, 0, 0).tensor("b", {64}, 0, 128).pad_to(32).zeros(512);
  EXPECT_REJECTS(g.bytes, "overlaps");
}

TEST(GgufReader, UnknownTensorType) {
  RawGguf g;
  g.header(1, 0).tensor("t", {32}, 4, 0).pad_to(32).zeros(64);  // 4 = removed Q4_2
  EXPECT_REJECTS(g.bytes, "unknown type id 4");
  RawGguf h;
  h.header(1, 0).tensor("t", {32}, 1000, 0).pad_to(32).zeros(64);
  EXPECT_REJECTS(h.bytes, "unknown type id 1000");
}

TEST(GgufReader, DimsOverflow) {
  RawGguf g;
  g.header(1, 0).tensor("t", {int64_t{1} << 40, int64_t{1} << 40}, 0, 0).pad_to(32);
  EXPECT_REJECTS(g.bytes, "overflow");
  RawGguf neg;
  neg.header(1, 0).tensor("t", {-32}, 0, 0).pad_to(32);
  EXPECT_REJECTS(neg.bytes, "negative dimension");
  RawGguf five;
  five.header(1, 0).tensor("t", {1, 1, 1, 1, 1}, 0, 0).pad_to(32);
  EXPECT_REJECTS(five.bytes, "5 dimensions");
}

TEST(GgufReader, RowNotMultipleOfBlock) {
  RawGguf g;
  g.header(1, 0).tensor("t", {33}, 8, 0).pad_to(32).zeros(64);  // Q8_0 block of 32
  EXPECT_REJECTS(g.bytes, "not a multiple of the Q8_0 block size");
}

TEST(GgufReader, DuplicateKeys) {
  RawGguf g;
  g.header(0, 2).kv_u32("same", 1).kv_u32("same", 2);
  EXPECT_REJECTS(g.bytes, "duplicate metadata key 'same'");
}

TEST(GgufReader, DuplicateTensorNames) {
  RawGguf g;
  g.header(2, 0).tensor("w", {32}, 0, 0).tensor("w", {32}, 0, 128).pad_to(32).zeros(256);
  EXPECT_REJECTS(g.bytes, "duplicate tensor name 'w'");
}

TEST(GgufReader, MisalignedOffsetAndBadAlignment) {
  RawGguf g;
  g.header(1, 0).tensor("t", {32}, 0, 8).pad_to(32).zeros(256);
  EXPECT_REJECTS(g.bytes, "not a multiple of the alignment");
  RawGguf h;
  h.header(0, 1).kv_u32("general.alignment", 24);
  EXPECT_REJECTS(h.bytes, "power-of-two");
}

TEST(GgufReader, TypedGettersNameTheKey) {
  RawGguf g;
  g.header(0, 1).kv_u32("n", 5);
  File f = File::parse(g.bytes, "m.gguf");
  EXPECT_EQ(f.get_int("n"), 5);
  EXPECT_DOUBLE_EQ(f.get_float("n"), 5.0);
  try {
    f.get_string("n");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'n' is uint32, expected a string"), std::string::npos);
  }
  try {
    f.get_int("missing.key");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'missing.key' is missing"), std::string::npos);
  }
}

TEST(GgufReader, OpenReportsMissingAndEmptyFiles) {
  const std::string missing = epq::testing::temp_path("no-such-file.gguf");
  EXPECT_THROW(File::open(missing), Error);
  std::string empty = epq::testing::temp_path("empty.gguf");
  std::ofstream(empty).close();
  EXPECT_THROW(File::open(empty), Error);
  std::filesystem::remove(empty);
}

// The VmFlags of the mapping that starts at `start`, from /proc/self/smaps.
std::string vm_flags(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash < line.find(' ')) {  // "start-end perms offset dev inode path"
      inside = std::stoull(line.substr(0, dash), nullptr, 16) == reinterpret_cast<uintptr_t>(start);
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "(mapping not found)";
}

// All in RAM the mapping asks for huge pages ("hg"); header-only it asks for no readahead ("rr").
TEST(GgufReader, MappingAdviceFollowsTheAccess) {
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage")) GTEST_SKIP() << "this kernel has no transparent huge pages";
  std::string path = epq::testing::temp_path("advice.gguf");
  {
    Writer w(path, 32);
    w.set("a", Value::integer(ValueType::UINT32, 1));
    w.add_tensor("t", quant::Type::F32, {8});
    w.begin_data();
    const std::vector<uint8_t> zeros(32);
    w.write_data(zeros);
    w.finish();
  }
  {
    File all = File::open(path);
    const std::string flags = vm_flags(all.mapping(0));
    EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
    EXPECT_EQ(flags.find(" rr"), std::string::npos) << flags;
  }
  {
    File header = File::open(path, File::Access::kHeaderOnly);
    const std::string flags = vm_flags(header.mapping(0));
    EXPECT_NE(flags.find(" rr"), std::string::npos) << flags;
    EXPECT_EQ(flags.find(" hg"), std::string::npos) << flags;
  }
  std::filesystem::remove(path);
}

TEST(GgufWriter, RoundTripsEveryValueTypeAndTensorData) {
  std::string path = epq::testing::temp_path("writer-test.gguf");
  {
    Writer w(path, 64);
    w.set("u8", Value::integer(ValueType::UINT8, 200));
    w.set("i8", Value::integer(ValueType::INT8, -100));
    w.set("u16", Value::integer(ValueType::UINT16, 60000));
    w.set("i16", Value::integer(ValueType::INT16, -30000));
    w.set("u32", Value::integer(ValueType::UINT32, 4000000000));
    w.set("i32", Value::integer(ValueType::INT32, -2000000000));
    w.set("u64", Value::u64(~uint64_t{0}));
    w.set("i64", Value::integer(ValueType::INT64, INT64_MIN));
    w.set("f32", Value::floating(ValueType::FLOAT32, 1.5));
    w.set("f64", Value::floating(ValueType::FLOAT64, 3.141592653589793));
    w.set("b", Value::integer(ValueType::BOOL, 1));
    w.set("s", Value::string("héllo"));
    w.set("strs", Value::string_array({"a", "", "ccc"}));
    w.set("ints", Value::int_array(ValueType::INT32, {1, -2, 3}));
    w.set("floats", Value::float_array(ValueType::FLOAT32, {0.5, -0.25}));
    w.set("nested", Value::array(ValueType::ARRAY, {Value::int_array(ValueType::UINT8, {1, 2}),
                                                     Value::string_array({"x"})}));
    w.add_tensor("a", quant::Type::F32, {3 * 8});
    w.add_tensor("b", quant::Type::Q8_0, {32, 2});
    w.begin_data();
    std::vector<uint8_t> a(96, 0xAB), b(68, 0xCD);
    w.write_data({a.data(), 10});  // chunked
    w.write_data({a.data() + 10, 86});
    w.write_data(b);
    w.finish();
  }
  File f = File::open(path);
  EXPECT_EQ(f.shards()[0].alignment, 64u);
  EXPECT_EQ(f.get_int("u8"), 200);
  EXPECT_EQ(f.get_int("i8"), -100);
  EXPECT_EQ(f.get_int("u16"), 60000);
  EXPECT_EQ(f.get_int("i16"), -30000);
  EXPECT_EQ(f.get_int("u32"), 4000000000);
  EXPECT_EQ(f.get_int("i32"), -2000000000);
  EXPECT_EQ(f.find("u64")->as_uint(), ~uint64_t{0});
  EXPECT_EQ(f.get_int("i64"), INT64_MIN);
  EXPECT_EQ(f.get_float("f32"), 1.5);
  EXPECT_EQ(f.get_float("f64"), 3.141592653589793);
  EXPECT_TRUE(f.get_bool_or("b", false));
  EXPECT_EQ(f.get_string("s"), "héllo");
  EXPECT_EQ(f.get_array("strs", ValueType::STRING).strings(), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_array("ints", ValueType::INT32).ints(), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f.get_array("floats", ValueType::FLOAT32).floats(), (std::vector<double>{0.5, -0.25}));
  const Value& nested = f.get_array("nested", ValueType::ARRAY);
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(nested.arrays()[0].ints(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(nested.arrays()[1].strings(), (std::vector<std::string>{"x"}));
  const TensorInfo* b = f.find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset % 64, 0u);
  EXPECT_EQ(f.tensor_data(*b)[0], 0xCD);
  EXPECT_EQ(f.tensor_data(*f.find_tensor("a"))[95], 0xAB);
  std::filesystem::remove(path);
}

TEST(GgufWriter, IncompleteWriteLeavesNoFile) {
  std::string path = epq::testing::temp_path("writer-partial.gguf");
  {
    Writer w(path);
    w.add_tensor("a", quant::Type::F32, {8});
    w.begin_data();
    EXPECT_THROW(w.finish(), Error);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

}  // namespace
}  // namespace epq::gguf
