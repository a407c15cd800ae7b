#pragma once
// One error type for everything the user can cause: a bad file, a bad flag, a budget too
// small, an I/O failure. Its message is the one line the user sees: whatever it quotes
// from a file or a request (names, keys, text) is made printable on the way in.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "util/format.h"

namespace epq {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(printable(message, kMaxMessageBytes)) {}
  static constexpr size_t kMaxMessageBytes = 2000;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace epq
