#include "server/guarded_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fmt/core.h>
#include <vector>

namespace epq::server {
namespace {

using Clock = std::chrono::steady_clock;

// poll() on one socket; > 0 ready, 0 timed out, < 0 failed.
int poll_one(socket_t sock, short events, Clock::duration wait) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(std::max(wait, Clock::duration::zero())).count();
  pollfd p{sock, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
  } while (r < 0 && errno == EINTR);
  return r;
}

void address_of(socket_t sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  auto* a = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? ::getpeername(sock, a, &len) : ::getsockname(sock, a, &len)) != 0) return;
  if (addr.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  } else {
    return;
  }
  char host[NI_MAXHOST] = {};
  if (::getnameinfo(a, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) == 0) ip = host;
}

// One connection's socket as httplib reads and writes it, with the request timeout and
// header bounds applied to what it reads (see guarded_server.h).
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(socket_t sock, Clock::duration read_timeout, Clock::duration write_timeout, Clock::duration reply_timeout)
      : sock_(sock), read_timeout_(read_timeout), write_timeout_(write_timeout), reply_timeout_(reply_timeout),
        buffer_(CPPHTTPLIB_RECV_BUFSIZ), reply_budget_(reply_timeout) {}

  // A new request: fresh wait budgets for it and its reply, and a fresh header count (bytes
  // already read are kept).
  void begin_request(Clock::duration budget) {
    budget_ = budget;
    reply_budget_ = reply_timeout_;
    cut_ = ReadCut::none;
    in_headers_ = true;
    header_bytes_ = line_bytes_ = lines_ = body_line_bytes_ = 0;
    previous_ = 0;
  }

  // Waits up to `idle` (and the budget) for the request's first byte; false if none came
  // or the server stopped.
  bool wait_for_request(Clock::duration idle, const std::atomic<socket_t>& listener) {
    if (offset_ < size_) return true;
    const auto start = Clock::now();
    const auto end = start + std::min(idle, budget_);
    int r = 0;
    for (auto now = start; r == 0 && now < end && listener != INVALID_SOCKET; now = Clock::now()) {
      r = poll_one(sock_, POLLIN, std::min<Clock::duration>(end - now, std::chrono::milliseconds(100)));
    }
    spend(budget_, start);
    return r > 0 && listener != INVALID_SOCKET;
  }

  // After the reply being written: end the connection.
  void close_after_reply() { closing_ = true; }
  bool closing() const { return closing_; }

  // Ends its half of the connection and drops what the client still sends, for up to
  // `total` (a silence of `gap` ends it early).
  void linger(Clock::duration total, Clock::duration gap) {
    ::shutdown(sock_, SHUT_WR);
    const auto end = Clock::now() + total;
    for (auto now = Clock::now(); now < end; now = Clock::now()) {
      if (poll_one(sock_, POLLIN, std::min(end - now, gap)) <= 0) return;
      const ssize_t n = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
      if (n == 0 || (n < 0 && errno != EINTR)) return;
    }
  }

  // A write waited past the write timeout or the reply's budget: the reply is cut off.
  bool stalled() const { return stalled_; }

  ReadCut cut() const { return cut_; }
  bool in_headers() const { return in_headers_; }
  bool request_began() const { return header_bytes_ > 0; }
  bool in_request_line() const { return lines_ == 0; }

  // Sends a whole response itself (a refusal), past the suppression of httplib's own.
  void send_all(const std::string& data) {
    for (size_t sent = 0; sent < data.size();) {
      if (!wait_writable()) return;
      const ssize_t n = send_some(data.data() + sent, data.size() - sent);
      if (n < 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  // (A wait spends the budget and may cut the request off, though httplib's interface
  // calls this const.)
  bool is_readable() const override { return offset_ < size_ || const_cast<GuardedStream*>(this)->wait_readable(); }

  // Once its line or headers are cut off, httplib's answer (400) is not sent: the
  // connection's owner sends the refusal. (A wait spends the reply's budget, though
  // httplib's interface calls this const.)
  bool is_writable() const override { return !refusing() && const_cast<GuardedStream*>(this)->wait_writable() && alive(); }

  ssize_t read(char* ptr, size_t size) override {
    if (cut_ != ReadCut::none) return -1;
    if (offset_ == size_) {
      if (!wait_readable()) return -1;
      ssize_t n;
      do {
        n = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      offset_ = 0;
      size_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, size_ - offset_);
    if (!account(buffer_.data() + offset_, n)) return -1;
    // In a body, httplib reads lines (a chunked body's chunk sizes) a byte at a time, of any
    // length; a data read is one byte only at a chunk's end, just before such a line.
    if (!in_headers_) {
      body_line_bytes_ = size == 1 && buffer_[offset_] != '\n' ? body_line_bytes_ + 1 : 0;
      if (body_line_bytes_ > GuardedServer::kMaxLineBytes + 1) {
        refuse(ReadCut::long_line);
        return -1;
      }
    }
    std::memcpy(ptr, buffer_.data() + offset_, n);
    offset_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    return send_some(ptr, size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  bool refusing() const { return cut_ != ReadCut::none && in_headers_; }

  static void spend(Clock::duration& budget, Clock::time_point since) { budget -= std::min<Clock::duration>(budget, Clock::now() - since); }

  // Waits for room to write, up to the write timeout and what is left of the reply's budget
  // (the time spent waiting for the client to read the reply, in all).
  bool wait_writable() {
    const auto start = Clock::now();
    const int r = poll_one(sock_, POLLOUT, std::min(reply_budget_, write_timeout_));
    spend(reply_budget_, start);
    if (r == 0) stalled_ = true;
    return r > 0;
  }

  // Waits for bytes to read, up to the read timeout and the budget left; a wait that ends
  // without them cuts the request off.
  bool wait_readable() {
    const bool budget_first = budget_ < read_timeout_;
    const auto start = Clock::now();
    const int r = poll_one(sock_, POLLIN, std::min(budget_, read_timeout_));
    spend(budget_, start);
    if (r == 0) cut_ = budget_first ? ReadCut::deadline : ReadCut::silent;
    return r > 0;
  }

  // Counts the request line and headers among bytes about to be handed to httplib; false
  // (the request is cut off) past a bound. The headers end at the first line that is
  // exactly CRLF after the request line, as httplib parses them.
  bool account(const char* p, size_t n) {
    for (size_t i = 0; i < n && in_headers_; ++i) {
      ++header_bytes_;
      ++line_bytes_;
      if (line_bytes_ > GuardedServer::kMaxLineBytes) return refuse(ReadCut::long_line);
      if (header_bytes_ > GuardedServer::kMaxHeaderBytes) return refuse(ReadCut::large_headers);
      if (p[i] == '\n') {
        if (lines_ > 0 && line_bytes_ == 2 && previous_ == '\r') {
          in_headers_ = false;
        } else if (++lines_ > GuardedServer::kMaxHeaderLines + 1) {
          return refuse(ReadCut::many_headers);
        }
        line_bytes_ = 0;
      }
      previous_ = p[i];
    }
    return true;
  }

  bool refuse(ReadCut why) {
    cut_ = why;
    return false;
  }

  // httplib's test before it writes: a peer that has closed its end gets nothing.
  bool alive() const {
    pollfd p{sock_, POLLIN, 0};
    const int r = ::poll(&p, 1, 0);
    if (r == 0) return true;
    char c;
    return ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  // Sends what fits in the socket's buffer now (0 if nothing does), without waiting: every
  // wait is wait_writable's, so that the reply's budget counts it. (A blocking send of a
  // large buffer would wait inside send() up to the socket's write timeout each time.)
  ssize_t send_some(const char* p, size_t n) {
    ssize_t sent;
    do {
      sent = ::send(sock_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (sent < 0 && errno == EINTR);
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return sent;
  }

  const socket_t sock_;
  const Clock::duration read_timeout_, write_timeout_, reply_timeout_;
  std::vector<char> buffer_;
  size_t offset_ = 0, size_ = 0;  // the unread part of buffer_

  Clock::duration budget_{};        // what is left of the request timeout
  Clock::duration reply_budget_{};  // what is left of the reply timeout
  ReadCut cut_ = ReadCut::none;
  bool in_headers_ = true;
  size_t header_bytes_ = 0, line_bytes_ = 0, lines_ = 0;  // lines_ counts the request line
  size_t body_line_bytes_ = 0;  // of the line being read in the body
  char previous_ = 0;
  bool closing_ = false;
  bool stalled_ = false;
};

thread_local GuardedStream* t_stream = nullptr;  // the connection this thread is serving

struct Serving {
  explicit Serving(GuardedStream& s) { t_stream = &s; }
  ~Serving() { t_stream = nullptr; }
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;
};

std::string in_seconds(Clock::duration t) {
  return fmt::format("{:g} s", std::chrono::duration_cast<std::chrono::duration<double>>(t).count());
}

struct Refusal {
  int status;
  const char* reason;
  std::string message;
};

// The whole response for a refusal, which ends its connection.
std::string refusal_response(const Refusal& r, const std::string& body, const char* extra_headers = "") {
  return fmt::format("HTTP/1.1 {} {}\r\nConnection: close\r\n{}{}Content-Length: {}\r\n\r\n{}", r.status, r.reason, extra_headers,
                     body.empty() ? "" : "Content-Type: application/json\r\n", body.size(), body);
}

Refusal refusal(ReadCut cut, bool in_request_line, Clock::duration request_timeout, Clock::duration read_timeout) {
  switch (cut) {
    case ReadCut::silent:
      return {408, "Request Timeout", fmt::format("the client sent nothing for {} in the middle of its request line or headers", in_seconds(read_timeout))};
    case ReadCut::long_line:
      if (in_request_line) return {414, "URI Too Long", fmt::format("the request line is longer than {} bytes", GuardedServer::kMaxLineBytes)};
      return {431, "Request Header Fields Too Large", fmt::format("a header line is longer than {} bytes", GuardedServer::kMaxLineBytes)};
    case ReadCut::many_headers:
      return {431, "Request Header Fields Too Large", fmt::format("the request has more than {} header lines", GuardedServer::kMaxHeaderLines)};
    case ReadCut::large_headers:
      return {431, "Request Header Fields Too Large",
              fmt::format("the request line and headers are larger than {} bytes", GuardedServer::kMaxHeaderBytes)};
    case ReadCut::none:
    case ReadCut::deadline:
      break;
  }
  return {408, "Request Timeout", fmt::format("the request line and headers did not arrive within the request timeout ({})", in_seconds(request_timeout))};
}

}  // namespace

GuardedServer::GuardedServer() {
  httplib::Server::set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    if (t_stream && res.get_header_value("Connection") == "close") t_stream->close_after_reply();
    if (logger_for_user_) logger_for_user_(req, res);
  });
}

GuardedServer& GuardedServer::set_logger(httplib::Logger logger) {
  logger_for_user_ = std::move(logger);
  return *this;
}

GuardedServer& GuardedServer::set_request_timeout(std::chrono::milliseconds timeout) {
  request_timeout_ = timeout;
  return *this;
}

GuardedServer& GuardedServer::set_reply_timeout(std::chrono::milliseconds timeout) {
  reply_timeout_ = timeout;
  return *this;
}

GuardedServer& GuardedServer::set_max_connections_per_address(int limit) {
  address_slots_.set_limit(limit);
  return *this;
}

GuardedServer& GuardedServer::set_refusal_handler(std::function<std::string(int, const std::string&)> handler) {
  refusal_handler_ = std::move(handler);
  return *this;
}

ReadCut GuardedServer::read_cut() { return t_stream ? t_stream->cut() : ReadCut::none; }

// httplib's own loop (process_server_socket), on one GuardedStream for the connection.
bool GuardedServer::process_and_close_socket(socket_t sock) {
  using std::chrono::microseconds;
  using std::chrono::seconds;
  const Clock::duration read_timeout = seconds(read_timeout_sec_) + microseconds(read_timeout_usec_);
  GuardedStream strm(sock, read_timeout, seconds(write_timeout_sec_) + microseconds(write_timeout_usec_), reply_timeout_);
  const auto linger = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kLingerSeconds));
  const auto linger_gap = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kLingerGapSeconds));
  std::string address;
  int port = 0;
  address_of(sock, true, address, port);
  const AddressSlots::Slot slot = address_slots_.take(address);
  if (!slot) {
    const Refusal r{429, "Too Many Requests",
                    fmt::format("this address already holds {} connections, the most one address may (--max-connections-per-address)",
                                address_slots_.limit())};
    strm.send_all(refusal_response(r, refusal_handler_ ? refusal_handler_(r.status, r.message) : std::string(), "Retry-After: 1\r\n"));
    strm.linger(linger, linger_gap);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return false;
  }
  bool ret = false;
  for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    strm.begin_request(request_timeout_);
    if (!strm.wait_for_request(seconds(keep_alive_timeout_sec_), svr_sock_)) break;
    bool connection_closed = false;
    {
      Serving serving(strm);
      ret = process_request(strm, left == 1, connection_closed, nullptr);
    }
    if (strm.cut() != ReadCut::none) {
      if (strm.in_headers() && strm.request_began()) {
        const Refusal r = refusal(strm.cut(), strm.in_request_line(), request_timeout_, read_timeout);
        strm.send_all(refusal_response(r, refusal_handler_ ? refusal_handler_(r.status, r.message) : std::string()));
      }
      // The rest of the request is unread, or its client too slow: nothing can follow on the connection.
      strm.linger(linger, linger_gap);
      break;
    }
    if (!ret) break;
    if (strm.closing()) {
      strm.linger(linger, linger_gap);
      break;
    }
    if (connection_closed) break;
  }
  if (strm.stalled()) {
    // A reply cut off: reset the connection, dropping what its client has not read (a
    // graceful close would keep sending it to the slow client, from kernel memory).
    const struct linger reset{1, 0};
    ::setsockopt(sock, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  } else {
    ::shutdown(sock, SHUT_RDWR);
  }
  ::close(sock);
  return ret;
}

}  // namespace epq::server
