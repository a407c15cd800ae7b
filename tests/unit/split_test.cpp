// Split models (gguf-split layout): names, the shard plans of the split writer, a model
// written in shards read back as one, and one crafted shard set for each way a set can be
// wrong, each refused with an error naming the file and the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/split.h"
#include "gguf/split_writer.h"
#include "gguf/writer.h"
#include "temp_path.h"
#include "util/error.h"

namespace epq::gguf {
namespace {

TEST(SplitNames, FollowGgufSplit) {
  EXPECT_EQ(split_path("dir/m", 0, 3), "dir/m-00001-of-00003.gguf");
  EXPECT_EQ(split_path("m", 11, 12), "m-00012-of-00012.gguf");
  const auto n = parse_split_name("dir/model-q4-00002-of-00003.gguf");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->prefix, "dir/model-q4");
  EXPECT_EQ(n->no, 1);
  EXPECT_EQ(n->count, 3);
  for (const char* bad : {"model.gguf", "m-0001-of-00003.gguf", "m-00004-of-00003.gguf", "m-00000-of-00003.gguf",
                          "m-00001-of-00003.bin", "m_00001-of-00003.gguf", "-00001-of-00003.gguf", "m-0000x-of-00003.gguf"}) {
    EXPECT_FALSE(parse_split_name(bad)) << bad;
  }
  EXPECT_EQ(model_name("dir/model-q4-00001-of-00003.gguf"), "model-q4");
  EXPECT_EQ(model_name("dir/model-q4.gguf"), "model-q4");
  EXPECT_EQ(model_name("model"), "model");
  EXPECT_EQ(model_name("m-0001-of-00003.gguf"), "m-0001-of-00003");  // not the layout: kept whole
}

TEST(SplitPlans, ByCountGivesEveryShardATensorAndKeepsOrder) {
  const std::vector<uint64_t> bytes = {100, 1, 1, 1, 1000, 5, 5, 5, 5, 5};
  for (int n = 1; n <= static_cast<int>(bytes.size()); ++n) {
    const std::vector<int> s = shards_by_count(bytes, n);
    ASSERT_EQ(s.size(), bytes.size());
    EXPECT_EQ(s.front(), 0);
    EXPECT_EQ(s.back(), n - 1) << n;
    for (size_t i = 1; i < s.size(); ++i) EXPECT_TRUE(s[i] == s[i - 1] || s[i] == s[i - 1] + 1) << n;
  }
  EXPECT_EQ(shards_by_count(std::vector<uint64_t>{10, 10, 10, 10}, 2), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_THROW(shards_by_count(bytes, 11), Error);
  EXPECT_THROW(shards_by_count(bytes, 0), Error);
}

TEST(SplitPlans, BySizeStaysUnderTheLimitButForLargeTensors) {
  EXPECT_EQ(shards_by_size(std::vector<uint64_t>{4, 4, 4, 9, 1, 1}, 8), (std::vector<int>{0, 0, 1, 2, 3, 3}));
  EXPECT_EQ(shards_by_size(std::vector<uint64_t>{4, 4}, 100), (std::vector<int>{0, 0}));
}

// A small model of named F32 tensors, each filled with its index.
struct Model {
  std::string path;
  std::vector<std::string> names;
};

Model write_model(const std::string& name, int n_tensors) {
  Model m{epq::testing::temp_path(name), {}};
  Writer w(m.path);
  w.set("general.architecture", Value::string("test"));
  for (int i = 0; i < n_tensors; ++i) {
    m.names.push_back("t" + std::to_string(i));
    w.add_tensor(m.names.back(), quant::Type::F32, {8 * (i + 1)});
  }
  w.begin_data();
  for (int i = 0; i < n_tensors; ++i) w.write_data(std::vector<uint8_t>(32 * static_cast<size_t>(i + 1), static_cast<uint8_t>(i)));
  w.finish();
  return m;
}

// One shard written by hand, with any split keys and tensors.
void write_shard(const std::string& path, int no, int count, int total, const std::vector<std::string>& tensors) {
  Writer w(path);
  w.set(std::string(kSplitNoKey), Value::integer(ValueType::UINT16, no));
  w.set(std::string(kSplitCountKey), Value::integer(ValueType::UINT16, count));
  w.set(std::string(kSplitTensorsCountKey), Value::integer(ValueType::INT32, total));
  for (const std::string& t : tensors) w.add_tensor(t, quant::Type::F32, {8});
  w.begin_data();
  for (size_t i = 0; i < tensors.size(); ++i) w.write_data(std::vector<uint8_t>(32, 0));
  w.finish();
}

std::string open_error(const std::string& path) {
  try {
    File::open(path, File::Access::kHeaderOnly);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_OPEN_FAILS(path, fragment) \
  EXPECT_NE(open_error(path).find(fragment), std::string::npos) << open_error(path)

class SplitFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = epq::testing::temp_path("split-test");
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string prefix(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_F(SplitFiles, ShardsReadBackAsTheModel) {
  const Model m = write_model("split-source.gguf", 7);
  const std::vector<std::string> paths = [&] {
    const File source = File::open(m.path);
    std::vector<uint64_t> bytes;
    for (const TensorInfo& t : source.tensors()) bytes.push_back(t.bytes);
    return write_split(source, prefix("m"), shards_by_count(bytes, 3));
  }();
  ASSERT_EQ(paths, (std::vector<std::string>{prefix("m-00001-of-00003.gguf"), prefix("m-00002-of-00003.gguf"), prefix("m-00003-of-00003.gguf")}));
  const File split = File::open(paths[0]);
  ASSERT_EQ(split.shards().size(), 3u);
  EXPECT_EQ(split.get_string("general.architecture"), "test");
  EXPECT_EQ(split.get_int("split.count"), 3);
  ASSERT_EQ(split.tensors().size(), 7u);
  size_t tensors = 0;
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(split.shards()[s].path, paths[s]);
    EXPECT_EQ(split.shards()[s].file_size, std::filesystem::file_size(paths[s]));
    EXPECT_GT(split.shards()[s].n_tensors, 0u);
    tensors += split.shards()[s].n_tensors;
  }
  EXPECT_EQ(tensors, 7u);
  uint32_t last_shard = 0;
  for (size_t i = 0; i < m.names.size(); ++i) {
    const TensorInfo* t = split.find_tensor(m.names[i]);
    ASSERT_NE(t, nullptr);
    EXPECT_GE(t->shard, last_shard);  // consecutive runs, in the model's order
    last_shard = t->shard;
    EXPECT_EQ(t->offset % split.shards()[t->shard].alignment, 0u);
    const auto data = split.tensor_data(*t);
    ASSERT_EQ(data.size(), 32 * (i + 1));
    EXPECT_EQ(data[0], i);
    EXPECT_EQ(data[data.size() - 1], i);
  }
  EXPECT_EQ(last_shard, 2u);
  // The later shards carry only the split keys.
  for (size_t s = 1; s < 3; ++s) {
    const File shard = File::parse({split.mapping(static_cast<uint32_t>(s)), split.shards()[s].file_size}, paths[s]);
    EXPECT_EQ(shard.metadata().size(), 3u);
  }
  std::filesystem::remove(m.path);
}

TEST_F(SplitFiles, AnUnsplitFileIsOneShard) {
  const Model m = write_model("split-unsplit.gguf", 2);
  const File f = File::open(m.path);
  ASSERT_EQ(f.shards().size(), 1u);
  EXPECT_EQ(f.shards()[0].path, m.path);
  EXPECT_EQ(f.shards()[0].n_tensors, 2u);
  EXPECT_EQ(f.find_tensor("t1")->shard, 0u);
  std::filesystem::remove(m.path);
}

TEST_F(SplitFiles, AMissingShardIsNamed) {
  write_shard(prefix("m-00001-of-00003.gguf"), 0, 3, 3, {"a"});
  write_shard(prefix("m-00002-of-00003.gguf"), 1, 3, 3, {"b"});
  EXPECT_OPEN_FAILS(prefix("m-00001-of-00003.gguf"), "m-00003-of-00003.gguf: missing: the model");
}

TEST_F(SplitFiles, ALaterShardGivenFirstNamesTheFirst) {
  write_shard(prefix("m-00002-of-00002.gguf"), 1, 2, 2, {"b"});
  EXPECT_OPEN_FAILS(prefix("m-00002-of-00002.gguf"), "this is shard 2 of 2 of a split model; give the first shard, " + prefix("m-00001-of-00002.gguf"));
}

TEST_F(SplitFiles, WrongSplitCount) {
  write_shard(prefix("m-00001-of-00002.gguf"), 0, 2, 2, {"a"});
  write_shard(prefix("m-00002-of-00002.gguf"), 1, 3, 2, {"b"});
  EXPECT_OPEN_FAILS(prefix("m-00001-of-00002.gguf"), "m-00002-of-00002.gguf: split.count is 3, but the first shard");
}

TEST_F(SplitFiles, WrongSplitNo) {
  write_shard(prefix("m-00001-of-00003.gguf"), 0, 3, 3, {"a"});
  write_shard(prefix("m-00002-of-00003.gguf"), 2, 3, 3, {"b"});
  write_shard(prefix("m-00003-of-00003.gguf"), 2, 3, 3, {"c"});
  EXPECT_OPEN_FAILS(prefix("m-00001-of-00003.gguf"), "m-00002-of-00003.gguf: split.no is 2 (shard 3 of 3), but the file is named as shard 2");
}

TEST_F(SplitFiles, TensorTotalMustMatch) {
  write_shard(prefix("m-00001-of-00002.gguf"), 0, 2, 4, {"a"});
  write_shard(prefix("m-00002-of-00002.gguf"), 1, 2, 4, {"b", "c"});
  EXPECT_OPEN_FAILS(prefix("m-00001-of-00002.gguf"), "its 2 shards hold 3 tensors, but split.tensors.count says 4");
}

TEST_F(SplitFiles, AShardOfAnotherModel) {
  write_shard(prefix("m-00001-of-00002.gguf"), 0, 2, 2, {"a"});
  write_shard(prefix("m-00002-of-00002.gguf"), 1, 2, 5, {"b"});
  EXPECT_OPEN_FAILS(prefix("m-00001-of-00002.gguf"), "split.tensors.count is 5, but the first shard");
}

TEST_F(SplitFiles, ADuplicateTensorNamesBothShards) {
  write_shard(prefix("m-00001-of-00002.gguf"), 0, 2, 2, {"a"});
  write_shard(prefix("m-00002-of-00002.gguf"), 1, 2, 2, {"a"});
  EXPECT_OPEN_FAILS(prefix("m-00001-of-00002.gguf"), "m-00002-of-00002.gguf: tensor 'a' is also in " + prefix("m-00001-of-00002.gguf"));
}

TEST_F(SplitFiles, NamesMustAgreeWithTheKeys) {
  write_shard(prefix("m-00001-of-00003.gguf"), 0, 2, 2, {"a"});
  EXPECT_OPEN_FAILS(prefix("m-00001-of-00003.gguf"), "named as shard 1 of 3, but its split keys say it is shard 1 of 2");
  write_shard(prefix("renamed.gguf"), 0, 2, 2, {"a"});
  EXPECT_OPEN_FAILS(prefix("renamed.gguf"), "not named <prefix>-00001-of-00002.gguf");
}

TEST_F(SplitFiles, ALaterShardWithoutSplitKeys) {
  write_shard(prefix("m-00001-of-00002.gguf"), 0, 2, 2, {"a"});
  const Model plain = write_model("split-plain.gguf", 1);
  std::filesystem::rename(plain.path, prefix("m-00002-of-00002.gguf"));
  EXPECT_OPEN_FAILS(prefix("m-00001-of-00002.gguf"), "m-00002-of-00002.gguf: has no split keys");
}

TEST_F(SplitFiles, SplitKeysOutOfRange) {
  write_shard(prefix("one.gguf"), 1, 1, 1, {"a"});
  EXPECT_OPEN_FAILS(prefix("one.gguf"), "split.no is 1, but split.count is 1");
  write_shard(prefix("zero.gguf"), 0, 0, 1, {"a"});
  EXPECT_OPEN_FAILS(prefix("zero.gguf"), "split.count is 0, expected 1 to 65535");
}

TEST_F(SplitFiles, AOneShardSplitIsAModel) {
  write_shard(prefix("solo-00001-of-00001.gguf"), 0, 1, 2, {"a", "b"});
  EXPECT_EQ(File::open(prefix("solo-00001-of-00001.gguf")).tensors().size(), 2u);
}

}  // namespace
}  // namespace epq::gguf
