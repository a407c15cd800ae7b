#include "server/reasoning_splitter.h"

#include <algorithm>

namespace epq::server {
namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ReasoningSplitter::Delta ReasoningSplitter::push(std::string_view text) {
  pending_ += text;
  Delta out;
  for (;;) {
    const std::string_view tag = reasoning_ ? kClose : kOpen;
    const size_t at = pending_.find(tag);
    // An opening tag only counts before any answer text (leading whitespace aside).
    const bool opening_allowed = reasoning_ || !seen_content_;
    if (at != std::string::npos && opening_allowed) {
      std::string before = pending_.substr(0, at);
      if (reasoning_) {
        out.reasoning += before;
      } else if (before.find_first_not_of(" \t\r\n") != std::string::npos) {
        out.content += before;  // (whitespace before an opening tag is dropped)
      }
      pending_.erase(0, at + tag.size());
      reasoning_ = !reasoning_;
      if (!reasoning_) {  // the answer usually starts after blank lines
        while (!pending_.empty() && (pending_.front() == '\n')) pending_.erase(0, 1);
      }
      continue;
    }
    const size_t hold = opening_allowed ? partial_tag(pending_, tag) : 0;
    std::string ready = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, ready.size());
    if (reasoning_) {
      out.reasoning += ready;
    } else {
      if (ready.find_first_not_of(" \t\r\n") != std::string::npos) seen_content_ = true;
      out.content += ready;
    }
    return out;
  }
}

ReasoningSplitter::Delta ReasoningSplitter::finish() {
  Delta out;
  (reasoning_ ? out.reasoning : out.content) = pending_;
  pending_.clear();
  return out;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind(kOpen);
  return open != std::string_view::npos && prompt.find(kClose, open) == std::string_view::npos;
}

}  // namespace epq::server
