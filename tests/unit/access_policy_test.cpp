// The server's access checks (server/access_policy.h): key comparison, origin lists, and
// admit()'s answers for keys, origins, preflights and content types.
#include "server/access_policy.h"

#include <gtest/gtest.h>

#include "server/openai_protocol.h"
#include "util/error.h"

namespace epq::server {
namespace {

httplib::Request request(const std::string& method, const std::string& path) {
  httplib::Request r;
  r.method = method;
  r.path = path;
  r.set_header("Host", "127.0.0.1:8080");
  return r;
}

// The status admit() refuses req with, or 0 when it lets it through.
int refusal(const AccessPolicy& policy, const httplib::Request& req) {
  httplib::Response res;
  try {
    policy.admit(req, res);
    return 0;
  } catch (const ApiError& e) {
    return e.status;
  }
}

TEST(AccessPolicy, KeysAreEqualOnlyWhenEveryByteIs) {
  EXPECT_TRUE(equal_in_constant_time("secret-key", "secret-key"));
  EXPECT_FALSE(equal_in_constant_time("secret-kez", "secret-key"));
  EXPECT_FALSE(equal_in_constant_time("secret", "secret-key"));
  EXPECT_FALSE(equal_in_constant_time("secret-key-2", "secret-key"));
  EXPECT_FALSE(equal_in_constant_time("", "secret-key"));
}

TEST(AccessPolicy, BadKeysAndOriginsAreRefused) {
  EXPECT_THROW(check_api_key("", "--api-key"), Error);
  EXPECT_THROW(check_api_key("has space", "--api-key"), Error);
  EXPECT_NO_THROW(check_api_key("sk-0123456789", "--api-key"));
  EXPECT_THROW(parse_cors_origins({"not an origin"}), Error);
  EXPECT_EQ(parse_cors_origins({"HTTP://Example.com/,http://localhost:3000"}),
            (std::vector<std::string>{"http://example.com", "http://localhost:3000"}));
}

TEST(AccessPolicy, AdmitChecksKeyOriginAndContentType) {
  const AccessPolicy policy({"sk-test", {"http://localhost:3000"}, "127.0.0.1"});
  // A POST to the API with this content type, key and origin (empty: no such header).
  auto post = [](const std::string& type, const std::string& key, const std::string& origin) {
    httplib::Request r = request("POST", "/v1/completions");
    r.set_header("Content-Type", type);
    if (!key.empty()) r.set_header("Authorization", "Bearer " + key);
    if (!origin.empty()) r.set_header("Origin", origin);
    return r;
  };
  const std::string json = "application/json";
  EXPECT_EQ(refusal(policy, post(json, "", "")), 401);
  EXPECT_EQ(refusal(policy, post(json, "sk-wrong", "")), 401);
  EXPECT_EQ(refusal(policy, post(json, "sk-test", "")), 0);
  EXPECT_EQ(refusal(policy, post("text/plain", "sk-test", "")), 415);
  EXPECT_EQ(refusal(policy, post(json, "sk-test", "http://evil.example")), 403);
  EXPECT_EQ(refusal(policy, post(json, "sk-test", "http://localhost:3000")), 0);
  EXPECT_EQ(refusal(policy, post(json, "sk-test", "http://127.0.0.1:8080")), 0);  // the server's own
  EXPECT_EQ(refusal(policy, request("GET", "/health")), 0);
}

}  // namespace
}  // namespace epq::server
