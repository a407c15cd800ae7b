// Injected I/O faults (EPQ_FAULT_INJECT) and what the pager makes of them, on both
// engines: a failed read is one clear error and its expert is read again by the next
// request, with the file's bytes; a read cut short is sent again for the rest; a request
// abandoned midway leaves the arena consistent.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "models/model.h"
#include "pager/fault_injection.h"
#include "pager/pager.h"
#include "synth/qwen3moe.h"
#include "temp_path.h"
#include "util/buffer.h"
#include "util/error.h"

namespace epq::pager {
namespace {

TEST(FaultInjection, ParsesTheDocumentedFaults) {
  EXPECT_FALSE(FaultInjection::parse("").uring_refused());
  EXPECT_TRUE(FaultInjection::parse("eio@3,uring-refused").uring_refused());
  EXPECT_NO_THROW(FaultInjection::parse("short@1,eio@2,eio@9"));
  for (const char* bad : {"eio", "eio@", "eio@0", "eio@x", "eio@3x", "enospc@2", "uring", "short@-1", "eio@3,"}) {
    EXPECT_THROW(FaultInjection::parse(bad), Error) << bad;
  }
}

TEST(FaultInjection, FailsAndShortensTheNamedReads) {
  Buffer buf(4 * kDirectAlign);
  ReadRequest read{0, 0, static_cast<uint32_t>(buf.size()), buf.data(), 0};
  FaultInjection f = FaultInjection::parse("eio@2,short@3");
  EXPECT_EQ(f.apply(read, 16384), 16384);
  EXPECT_EQ(f.apply(read, 16384), -EIO);
  EXPECT_EQ(f.apply({0, 0, 4096, buf.data(), 0}, 4096), 4096);  // one block cannot be cut: the fault moves on
  std::fill_n(buf.data(), buf.size(), uint8_t{0});
  EXPECT_EQ(f.apply(read, 16384), 8192);
  EXPECT_EQ(buf.data()[8191], 0);
  EXPECT_NE(buf.data()[8192], 0);  // the bytes that did not arrive are overwritten
  EXPECT_EQ(f.apply(read, 16384), 16384);
}

class PagerFaults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = epq::testing::temp_path("fault-test.gguf");
    synth::write_qwen3moe(*synth::preset("tiny"), path_, [](const synth::Progress&) {});
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }
  void TearDown() override { unsetenv("EPQ_FAULT_INJECT"); }

  static std::vector<models::ExpertLayout> layouts() {
    gguf::File f = gguf::File::open(path_);
    return models::read_model_info(f, {}).experts;
  }

  static std::unique_ptr<Pager> pager(const char* io, const char* faults, int64_t slots = 4) {
    setenv("EPQ_FAULT_INJECT", faults, 1);
    PagerOptions o{{slots}, "lru", {}};
    o.io.backend = io;
    o.io.max_read_bytes = 16384;  // several pieces per matrix, so that reads are in flight when one fails
    return std::make_unique<Pager>(std::vector<std::string>{path_}, layouts(), o);
  }

  // Runs one layer's request to the end; every delivered expert must hold the file's bytes.
  static void expect_file_bytes(Pager& pager, int layer, const std::vector<int>& experts) {
    const models::ExpertLayout l = layouts()[static_cast<size_t>(layer)];
    pager.begin(layer, experts);
    std::vector<models::ReadyExpert> ready;
    size_t delivered = 0;
    while (pager.next(ready)) {
      for (const models::ReadyExpert& r : ready) {
        const Matrix* m[3] = {&r.gate, &r.up, &r.down};
        for (int p = 0; p < 3; ++p) {
          const models::ExpertPart& part = l.part(p);
          std::ifstream in(path_, std::ios::binary);
          in.seekg(static_cast<std::streamoff>(part.expert_offset(experts[static_cast<size_t>(r.index)])));
          std::vector<char> expected(part.bytes);
          in.read(expected.data(), static_cast<std::streamsize>(expected.size()));
          ASSERT_TRUE(std::equal(expected.begin(), expected.end(), reinterpret_cast<const char*>(m[p]->data))) << "part " << p;
        }
        ++delivered;
      }
    }
    EXPECT_EQ(delivered, experts.size());
  }

  static std::string path_;
};
std::string PagerFaults::path_;

TEST_F(PagerFaults, AFailedReadIsAnErrorAndItsExpertIsReadAgain) {
  for (const char* io : {"uring", "pread"}) {
    SCOPED_TRACE(io);
    auto p = pager(io, "eio@2");
    const std::vector<int> experts = {5, 1, 7};
    p->begin(0, experts);
    std::vector<models::ReadyExpert> ready;
    try {
      while (p->next(ready)) {
      }
      FAIL() << "the failed read went unnoticed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("Input/output error"), std::string::npos) << e.what();
    }
    const uint64_t misses = p->stats().misses;
    expect_file_bytes(*p, 0, experts);
    // The expert whose read failed misses again; the others landed and hit.
    EXPECT_EQ(p->stats().misses - misses, 1u);
    expect_file_bytes(*p, 1, {0, 2, 3, 4});  // every slot usable: none is left pinned
  }
}

TEST_F(PagerFaults, AShortReadIsSentAgainForTheRest) {
  for (const char* io : {"uring", "pread"}) {
    SCOPED_TRACE(io);
    auto p = pager(io, "short@1,short@4,short@5");
    expect_file_bytes(*p, 0, {2, 6});
    const uint64_t reads = p->stats().reads;
    auto clean = pager(io, "");
    expect_file_bytes(*clean, 0, {2, 6});
    EXPECT_EQ(reads, clean->stats().reads + 3);
  }
}

TEST_F(PagerFaults, IoUringRefusedFallsBackToPreadWithANote) {
  auto p = pager("uring", "uring-refused");
  EXPECT_STREQ(p->io_name(), "pread");
  ASSERT_FALSE(p->notes().empty());
  EXPECT_NE(p->notes().back().find("io_uring is unavailable: Operation not permitted; falling back to pread"), std::string::npos)
      << p->notes().back();
  expect_file_bytes(*p, 2, {0, 3});
}

TEST_F(PagerFaults, ARequestAbandonedMidwayLeavesTheArenaConsistent) {
  for (const char* io : {"uring", "pread"}) {
    SCOPED_TRACE(io);
    auto p = pager(io, "", 3);
    p->begin(0, std::vector<int>{1, 2, 3});  // then an exception in the caller, say, with every read in flight
    expect_file_bytes(*p, 0, {4, 5, 6});     // needs all three slots: none may stay pinned
    p->begin(1, std::vector<int>{1, 2, 3});
    std::vector<models::ReadyExpert> ready;
    ASSERT_TRUE(p->next(ready));  // one batch, then an exception
    expect_file_bytes(*p, 1, {4, 1, 5});
  }
}

}  // namespace
}  // namespace epq::pager
