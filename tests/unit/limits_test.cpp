// Limits on what input can make the program do: error text made printable, request JSON
// depth and number range, the request memory pool, the chat template size.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "server/openai_protocol.h"
#include "server/request_memory.h"
#include "util/error.h"
#include "util/format.h"

namespace epq {
namespace {

TEST(Printable, EscapesControlBytesAndInvalidUtf8) {
  EXPECT_EQ(printable("plain text"), "plain text");
  EXPECT_EQ(printable(std::string("a\0b\nc\x7f", 6)), "a\\x00b\\x0ac\\x7f");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");  // valid UTF-8 stays
  EXPECT_EQ(printable("\xff\xc3"), "\\xff\\xc3");                 // a stray byte, a cut sequence
  EXPECT_EQ(printable("\xc0\xaf \xed\xa0\x80"), "\\xc0\\xaf \\xed\\xa0\\x80");  // overlong, surrogate
  EXPECT_EQ(printable(std::string(300, 'x'), 10), "xxxxxxxxxx...");
  EXPECT_EQ(printable("\xe2\x82\xac\xe2\x82\xac", 4), "\xe2\x82\xac...");  // cut between characters
}

TEST(Printable, ErrorsAreOneLine) {
  const Error e("file says: " + std::string("line1\nline2\0tail", 16));
  EXPECT_STREQ(e.what(), "file says: line1\\x0aline2\\x00tail");
  EXPECT_LE(Error(std::string(100000, 'y')).what(), std::string(Error::kMaxMessageBytes + 3, 'y'));
  EXPECT_EQ(std::string(Error(std::string(100000, 'y')).what()).size(), Error::kMaxMessageBytes + 3);
}

TEST(RequestJson, DepthIsLimitedWhileParsing) {
  auto nested = [](int depth) { return std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']'); };
  EXPECT_NO_THROW(server::parse_request_json(nested(server::kMaxJsonDepth)));
  try {
    server::parse_request_json(nested(100000));
    FAIL() << "no error";
  } catch (const server::ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_STREQ(e.what(), "the request body nests JSON deeper than 64 levels");
  }
  EXPECT_THROW(server::parse_request_json("{\"a\": " + nested(65) + "}"), server::ApiError);
}

TEST(RequestJson, OutOfRangeNumbersAndBadBytesAre400) {
  for (const std::string body : {"{\"x\": 1e400}", "{\"x\": -1e400}", "{\"x\": \"\xff\"}", "{\"x\": \"\\ud800\"}", "{\"x\": 1", ""}) {
    SCOPED_TRACE(body);
    try {
      server::parse_request_json(body);
      FAIL() << "no error";
    } catch (const server::ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.body().find('\xff'), std::string::npos);  // the reply is valid JSON text
    }
  }
}

TEST(RequestJson, SamplingValuesOutOfRangeAre400) {
  for (const std::string body : {R"({"prompt": "a", "temperature": 2.5})", R"({"prompt": "a", "top_p": 1.5})",
                                 R"({"prompt": "a", "max_tokens": 0})", R"({"prompt": "a", "max_tokens": 2000000})"}) {
    SCOPED_TRACE(body);
    EXPECT_THROW(server::parse_completion_request(body, false), server::ApiError);
  }
}

// A content part whose "type" was not a string escaped as nlohmann's type_error (a 500)
// instead of a 400 (docs/results/fuzz_campaign.md).
TEST(RequestJson, ContentPartsOfAnyShapeAre400) {
  for (const std::string part : {R"({"type": 5, "text": "a"})", R"({"type": null, "text": "a"})", R"({"type": ["text"], "text": "a"})",
                                 R"({"text": "a"})", R"({"type": "text", "text": 5})", R"({"type": "image_url"})", R"("text")"}) {
    SCOPED_TRACE(part);
    const std::string body = R"({"messages": [{"role": "user", "content": [)" + part + "]}]}";
    try {
      server::parse_completion_request(body, true);
      FAIL() << "no error";
    } catch (const server::ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.param, "messages[0].content");
    }
  }
  const auto request = server::parse_completion_request(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})", true);
  EXPECT_EQ(request.messages[0]["content"], "ab");
}

TEST(RequestMemory, GrantsWhatIsFreeAndWaitsForTheRest) {
  server::RequestMemory pool(100);
  EXPECT_FALSE(pool.acquire(101, std::chrono::milliseconds(0)));  // more than it ever holds
  {
    server::MemoryReservation a(pool);
    EXPECT_TRUE(a.grow(60, std::chrono::milliseconds(0)));
    EXPECT_FALSE(pool.acquire(50, std::chrono::milliseconds(10)));  // not free, and not freed in time
    EXPECT_EQ(pool.in_use(), 60u);
  }
  EXPECT_EQ(pool.in_use(), 0u);  // the reservation gave its bytes back
  server::MemoryReservation b(pool);
  std::thread waiter;
  {
    server::MemoryReservation c(pool);
    EXPECT_TRUE(c.grow(50, std::chrono::milliseconds(0)));
    waiter = std::thread([&] { EXPECT_TRUE(b.grow(80, std::chrono::seconds(30))); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }  // c's release lets the waiter in
  waiter.join();
  EXPECT_EQ(pool.in_use(), 80u);
}

// Found by scripts/soak_server.py: two chunked bodies growing at once each held part of
// the pool and waited for the other's part until both got 503.
TEST(RequestMemory, AReservationThatMustWaitHoldsNothingMeanwhile) {
  using std::chrono::milliseconds;
  server::RequestMemory pool(100);
  server::MemoryReservation b(pool);
  std::thread waiter;
  {
    server::MemoryReservation a(pool);
    EXPECT_TRUE(a.grow(50, milliseconds(0)));
    EXPECT_TRUE(b.grow(40, milliseconds(0)));
    waiter = std::thread([&] { EXPECT_TRUE(b.grow(40, std::chrono::seconds(30))); });  // must wait for 80 in all
    while (pool.in_use() != 50) std::this_thread::sleep_for(milliseconds(1));        // ...holding nothing meanwhile
    EXPECT_TRUE(a.grow(50, milliseconds(0)));  // so a completes, where it would wait for b's 40 otherwise
  }  // a finishes: b gets its 80 at once
  waiter.join();
  EXPECT_EQ(b.bytes(), 80u);
  EXPECT_FALSE(b.grow(30, milliseconds(10)));  // never free in time: b is left holding nothing
  EXPECT_EQ(b.bytes(), 0u);
  EXPECT_EQ(pool.in_use(), 0u);
}

}  // namespace
}  // namespace epq
