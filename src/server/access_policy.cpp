#include "server/access_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "server/openai_protocol.h"
#include "util/error.h"
#include "util/format.h"

namespace epq::server {
namespace {

constexpr const char* kDefaultAllowedHeaders = "Authorization, Content-Type";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

// The host name of a Host header ("name:port", "[v6]:port"), without brackets and port.
std::string host_name(const std::string& host_header) {
  if (!host_header.empty() && host_header.front() == '[') {
    const size_t close = host_header.find(']');
    return close == std::string::npos ? host_header : host_header.substr(1, close - 1);
  }
  return host_header.substr(0, host_header.find(':'));
}

bool visible_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 127; });
}

bool all_of_chars(std::string_view s, std::string_view allowed) {
  return !s.empty() && s.find_first_not_of(allowed) == std::string_view::npos;
}

// scheme://host[:port], in lower case: a name or an [IPv6 address], and up to 5 digits.
bool is_origin(std::string_view o) {
  const size_t sep = o.find("://");
  if (sep == std::string_view::npos || sep == 0 || !std::isalpha(static_cast<unsigned char>(o[0]))) return false;
  if (!all_of_chars(o.substr(0, sep), "abcdefghijklmnopqrstuvwxyz0123456789+.-")) return false;
  std::string_view rest = o.substr(sep + 3);
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos || !all_of_chars(rest.substr(1, close - 1), "0123456789abcdef:.")) return false;
    rest.remove_prefix(close + 1);
  } else {
    const size_t colon = std::min(rest.find(':'), rest.size());
    if (!all_of_chars(rest.substr(0, colon), "abcdefghijklmnopqrstuvwxyz0123456789._~-")) return false;
    rest.remove_prefix(colon);
  }
  return rest.empty() || (rest.front() == ':' && rest.size() <= 6 && all_of_chars(rest.substr(1), "0123456789"));
}

ApiError unauthorized(const std::string& message) { return ApiError(401, "invalid_request_error", message, "invalid_api_key"); }

}  // namespace

std::vector<std::string> parse_cors_origins(const std::vector<std::string>& values) {
  std::vector<std::string> origins;
  for (const std::string& value : values) {
    size_t start = 0;
    while (start <= value.size()) {
      const size_t comma = std::min(value.find(',', start), value.size());
      std::string o = lower(trim(std::string_view(value).substr(start, comma - start)));
      start = comma + 1;
      if (o.size() > 1 && o.back() == '/') o.pop_back();
      if (o != "*" && !is_origin(o)) {
        fail("--cors-origin: '{}' is not an origin; give scheme://host[:port], such as http://localhost:3000, or *", printable(o));
      }
      origins.push_back(std::move(o));
    }
  }
  return origins;
}

void check_api_key(const std::string& key, const std::string& source) {
  if (key.empty()) fail("{}: the API key is empty", source);
  if (key.size() > 4096 || !visible_ascii(key)) {
    fail("{}: the API key must be 1 to 4096 visible ASCII characters (no spaces), as clients send it in a header", source);
  }
}

bool is_loopback_host(const std::string& host) {
  const std::string h = lower(host);
  if (h == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, h.c_str(), &v6) == 1 && std::memcmp(&v6, &in6addr_loopback, sizeof v6) == 0;
}

bool is_wildcard_host(const std::string& host) { return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]"; }

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff = diff | (x ^ static_cast<unsigned char>(b[i]));
  }
  return diff == 0;
}

bool AccessPolicy::own_origin(const std::string& origin, const httplib::Request& req) const {
  const std::string host = lower(req.get_header_value("Host"));
  if (host.empty() || lower(origin) != "http://" + host) return false;
  const std::string name = host_name(host);
  return is_loopback_host(name) || name == lower(host_name(options_.host)) || is_wildcard_host(options_.host);
}

bool AccessPolicy::listed_origin(const std::string& origin) const {
  const std::string o = lower(origin);
  return std::any_of(options_.cors_origins.begin(), options_.cors_origins.end(), [&](const std::string& c) { return c == "*" || c == o; });
}

void AccessPolicy::check_key(const httplib::Request& req) const {
  if (!req.has_header("Authorization")) throw unauthorized("this server needs an API key: send the header 'Authorization: Bearer KEY'");
  const std::string value = req.get_header_value("Authorization");
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() < kScheme.size() || strncasecmp(value.c_str(), kScheme.data(), kScheme.size()) != 0) {
    throw unauthorized("the Authorization header must be 'Bearer KEY'");
  }
  if (!equal_in_constant_time(trim(std::string_view(value).substr(kScheme.size())), options_.api_key)) {
    throw unauthorized("the API key is not the one this server was started with");
  }
}

bool AccessPolicy::admit(const httplib::Request& req, httplib::Response& res) const {
  const bool has_origin = req.has_header("Origin");
  const std::string origin = req.get_header_value("Origin");
  const bool cross_origin = has_origin && !own_origin(origin, req);
  if (cross_origin && !listed_origin(origin)) {
    throw ApiError(403, "invalid_request_error",
                   fmt::format("requests from the origin '{}' are not allowed (start the server with --cors-origin {} to allow it)",
                               printable(origin), printable(origin)),
                   "origin_not_allowed");
  }
  if (cross_origin) {
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
  }
  if (req.method == "OPTIONS") {  // a preflight, from an allowed origin or none: no key is needed (browsers send none)
    res.status = 204;
    res.set_header("Allow", "GET, POST, OPTIONS");
    if (cross_origin) {
      const std::string asked = req.get_header_value("Access-Control-Request-Headers");
      const bool echo = !asked.empty() && asked.size() <= 1024 && std::all_of(asked.begin(), asked.end(), [](char c) { return c >= ' ' && c < 127; });
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", echo ? asked : kDefaultAllowedHeaders);
      res.set_header("Access-Control-Max-Age", "600");
    }
    return true;
  }
  const bool open_route = (req.method == "GET" || req.method == "HEAD") && (req.path == "/" || req.path == "/health");
  if (!options_.api_key.empty() && !open_route) check_key(req);
  if (req.method == "POST") {
    const std::string type = req.get_header_value("Content-Type");
    if (lower(trim(std::string_view(type).substr(0, type.find(';')))) != "application/json") {
      throw ApiError(415, "invalid_request_error",
                     fmt::format("the request body must be JSON, sent with 'Content-Type: application/json' (got {})",
                                 type.empty() ? "no Content-Type" : "'" + printable(type) + "'"),
                     "unsupported_media_type");
    }
  }
  return false;
}

}  // namespace epq::server
