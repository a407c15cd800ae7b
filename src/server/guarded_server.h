#pragma once
// httplib's server with limits on reading a request and writing its reply that httplib
// lacks: its timeouts bound each recv() and send() alone, so a client trickling a byte
// every few seconds, or reading its reply that slowly, kept its connection (and its thread)
// for ever, and its header lines are counted nowhere.
//   1. The request timeout. The server waits at most `request_timeout` in all for one
//      request's bytes: its line, headers and body, and before them the wait for the
//      request to begin, from the end of the previous response on the connection (or from
//      when a connection thread takes the connection up). A read that would wait past it
//      fails; bytes already arrived are still read. Time the server spends itself
//      (handlers working, waiting for memory) is not counted.
//   1b. The reply timeout. A reply waits at most `reply_timeout` in all for the client to
//      read it (for room in the socket's send buffer), however steadily the client reads a
//      little now and then; a write that would wait past it, or past the write timeout,
//      fails, and the connection is reset (what the client has not read is dropped). Time
//      the handler spends producing the reply (a streamed generation) is not counted.
//   2. Line bounds, checked as the bytes are read (httplib reads a line of any length
//      before it checks it, and any number of header lines): the request line, each
//      header line and each line of a chunked body's framing at most kMaxLineBytes; at
//      most kMaxHeaderLines header lines, and kMaxHeaderBytes for the request line and
//      headers in all.
//   3. A read that fails (the request timeout, httplib's read timeout, a bound) ends the
//      connection once the request is answered. Cut off in its line or headers, the
//      request gets 408, 414 or 431 (with set_refusal_handler's body) instead of httplib's
//      400; cut off in its body, the handler reading it answers (read_cut() says why).
//   4. A reply with `Connection: close` ends the connection, a handler's too (one that
//      left the body unread): httplib ended it only when the client asked or at its
//      keep-alive maximum, and read the unread body as the next request.
//   5. A connection from an address that already holds set_max_connections_per_address
//      connections gets 429 (with the refusal handler's body and `Retry-After: 1`) before
//      anything of it is read, and is closed.
//   Ending a connection after a reply, the server reads and drops what the client still
//   sends for up to kLingerSeconds (kLingerGapSeconds of silence ends it), so that a
//   client still sending a body it was refused gets the reply, not a reset.
// Everything else (parsing, routing, keep-alive, the timeouts' values) is httplib's: this
// replaces only its connection loop (the virtual process_and_close_socket, around the
// protected process_request, as in httplib 0.11.4) and reads the socket through a Stream
// of its own.
#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "server/address_slots.h"

namespace epq::server {

// Why a read of a request failed.
enum class ReadCut {
  none,
  silent,          // httplib's read timeout: nothing arrived for that long
  deadline,        // the request timeout was spent
  long_line,       // a line longer than kMaxLineBytes
  many_headers,    // more than kMaxHeaderLines header lines
  large_headers,   // more than kMaxHeaderBytes of request line and headers
};

class GuardedServer : public httplib::Server {
 public:
  static constexpr size_t kMaxLineBytes = CPPHTTPLIB_HEADER_MAX_LENGTH;  // httplib's own limit per line (8 KiB)
  static constexpr size_t kMaxHeaderLines = 128;
  static constexpr size_t kMaxHeaderBytes = 32 << 10;
  static constexpr double kLingerSeconds = 2, kLingerGapSeconds = 0.5;

  GuardedServer();

  GuardedServer& set_request_timeout(std::chrono::milliseconds timeout);
  GuardedServer& set_reply_timeout(std::chrono::milliseconds timeout);
  // Connections one client address may hold at once (0, the default: no limit).
  GuardedServer& set_max_connections_per_address(int limit);
  // Called once for each refusal the server sends itself (408, 414, 429, 431), with its
  // status and message; returns the refusal's body. Without one, refusals have no body.
  GuardedServer& set_refusal_handler(std::function<std::string(int status, const std::string& message)> handler);

  // httplib's logger, which this class chains onto (it hides httplib's set_logger).
  GuardedServer& set_logger(httplib::Logger logger);

  // For handlers: why a read of the request this thread is serving failed (none if none did).
  static ReadCut read_cut();

 private:
  bool process_and_close_socket(socket_t sock) override;

  std::chrono::milliseconds request_timeout_{30000};
  std::chrono::milliseconds reply_timeout_{30000};
  std::function<std::string(int, const std::string&)> refusal_handler_;
  AddressSlots address_slots_;
  httplib::Logger logger_for_user_;
};

}  // namespace epq::server
