#pragma once
// The template engine's errors. Every error a caller sees is an epq::Error whose message
// starts with "template:LINE:COLUMN:", except RaisedError, whose message is exactly the
// one the template passed to raise_exception(): the conversation does not fit the model's
// format, which is the client's fault. Failure is internal: thrown where no position is
// known (a filter given a wrong argument), it becomes an epq::Error at the innermost
// expression or statement that was being evaluated.
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include "util/error.h"

namespace epq::text::jinja {

struct Location {
  int line = 1;
  int column = 1;
};

class RaisedError : public Error {
 public:
  using Error::Error;
};

class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void failure(fmt::format_string<Args...> format, Args&&... args) {
  throw Failure(fmt::format(format, std::forward<Args>(args)...));
}

[[noreturn]] inline void fail_at(Location at, std::string_view message) {
  throw Error(fmt::format("template:{}:{}: {}", at.line, at.column, message));
}

}  // namespace epq::text::jinja
