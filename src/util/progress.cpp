#include "util/progress.h"

#include <fmt/core.h>
#include <unistd.h>

namespace epq {

ProgressLine::ProgressLine(bool enabled)
    : enabled_(enabled), terminal_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}

double ProgressLine::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressLine::update(const std::string& text, bool final) {
  if (!enabled_) return;
  double now = elapsed_seconds();
  if (!final && now - last_ < (terminal_ ? 0.5 : 10.0)) return;
  last_ = now;
  if (terminal_) {
    fmt::print(stderr, "\r\033[K{}", text);
    drawn_ = true;
  } else {
    fmt::print(stderr, "{}\n", text);
  }
  std::fflush(stderr);
}

void ProgressLine::finish() {
  if (enabled_ && terminal_ && drawn_) fmt::print(stderr, "\n");
  drawn_ = false;
}

}  // namespace epq
