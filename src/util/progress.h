#pragma once
// A progress line on stderr: redrawn in place (twice a second) on a terminal, printed as
// plain lines (every 10 s) when stderr is a file or pipe, silent when disabled.
#include <chrono>
#include <string>

namespace epq {

class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  // Shows text if enough time has passed since the last update (or if final is set).
  void update(const std::string& text, bool final = false);
  // Ends the line (on a terminal) so later output starts cleanly.
  void finish();
  double elapsed_seconds() const;

 private:
  bool enabled_;
  bool terminal_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  double last_ = -1e9;
};

}  // namespace epq
