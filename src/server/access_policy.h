#pragma once
// Who may use `epq serve`, decided from a request's headers before its body is read.
//   1. Origin. Browsers send it with every cross-origin request and every POST. It must be
//      the server's own (the chat page at /) or one that --cors-origin allows; any other
//      gets 403. An allowed origin gets CORS headers, and its preflight (OPTIONS) an answer.
//   2. The API key. With one, every route but GET / (the page) and GET /health needs
//      `Authorization: Bearer KEY`, compared in constant time; without it, 401.
//   3. POST bodies must be application/json (415 otherwise). A page on another origin
//      can only send that after a preflight, which step 1 refuses it.
// The server's own origin is http:// and the Host header the client used, where that host
// is a loopback name, the --host address, or anything when listening on all addresses: a
// page on a DNS name rebound to 127.0.0.1 is refused by a loopback server.
#include <httplib.h>

#include <string>
#include <string_view>
#include <vector>

namespace epq::server {

struct AccessOptions {
  std::string api_key;                    // empty: no key needed
  std::vector<std::string> cors_origins;  // as parse_cors_origins returns them; "*" allows any
  std::string host;                       // the address the server listens on
};

// "--cors-origin" values: origins (scheme://host[:port]) or "*", one or a comma list each.
// Returns them normalized (lower case, no trailing slash); throws Error for anything else.
std::vector<std::string> parse_cors_origins(const std::vector<std::string>& values);
// Throws Error unless key is 1-4096 visible ASCII characters; `source` names where it came from.
void check_api_key(const std::string& key, const std::string& source);

bool is_loopback_host(const std::string& host);  // localhost, 127.0.0.0/8, ::1
bool is_wildcard_host(const std::string& host);  // 0.0.0.0, ::

// Whether a equals b; the time it takes depends only on b's length.
bool equal_in_constant_time(std::string_view a, std::string_view b);

class AccessPolicy {
 public:
  explicit AccessPolicy(AccessOptions options) : options_(std::move(options)) {}

  // Throws ApiError (401, 403 or 415) for a request that is refused. For an allowed
  // cross-origin request it adds the CORS headers to res. Returns true when res is the
  // whole answer (a preflight).
  bool admit(const httplib::Request& req, httplib::Response& res) const;

 private:
  bool own_origin(const std::string& origin, const httplib::Request& req) const;
  bool listed_origin(const std::string& origin) const;
  void check_key(const httplib::Request& req) const;

  AccessOptions options_;
};

}  // namespace epq::server
