#include "pager/fault_injection.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "util/error.h"

namespace epq::pager {
namespace {

constexpr uint8_t kPoison = 0xA5;  // what a faulted read leaves where bytes did not arrive

}  // namespace

FaultInjection FaultInjection::from_environment() {
  const char* spec = std::getenv("EPQ_FAULT_INJECT");
  return spec == nullptr ? FaultInjection{} : parse(spec);
}

FaultInjection FaultInjection::parse(std::string_view spec) {
  FaultInjection f;
  if (spec.empty()) return f;
  for (size_t start = 0, comma = 0; comma != std::string_view::npos; start = comma + 1) {
    comma = spec.find(',', start);
    const std::string_view item = spec.substr(start, comma == std::string_view::npos ? comma : comma - start);
    if (item == "uring-refused") {
      f.uring_refused_ = true;
      continue;
    }
    const size_t at = item.find('@');
    const std::string_view kind = item.substr(0, std::min(at, item.size()));
    uint64_t n = 0;
    const char* end = item.data() + item.size();
    const auto number = std::from_chars(at == std::string_view::npos ? end : item.data() + at + 1, end, n);
    const bool numbered = at != std::string_view::npos && number.ec == std::errc{} && number.ptr == end && n > 0;
    if (!numbered || (kind != "eio" && kind != "short")) {
      fail("EPQ_FAULT_INJECT: '{}' is not a fault (test-only; expected a comma list of eio@N, short@N and uring-refused)", printable(item));
    }
    (kind == "eio" ? f.eio_at_ : f.short_at_).push_back(n);
  }
  return f;
}

int64_t FaultInjection::apply(const ReadRequest& read, int64_t result) {
  ++reads_;
  shorts_due_ += static_cast<int>(std::count(short_at_.begin(), short_at_.end(), reads_));
  if (std::count(eio_at_.begin(), eio_at_.end(), reads_) > 0) {
    std::memset(read.dest, kPoison, read.length);
    return -EIO;
  }
  if (shorts_due_ > 0 && result > static_cast<int64_t>(kDirectAlign)) {
    --shorts_due_;
    const uint64_t delivered = std::max(kDirectAlign, align_down(static_cast<uint64_t>(result) / 2));
    std::memset(read.dest + delivered, kPoison, read.length - delivered);
    return static_cast<int64_t>(delivered);
  }
  return result;
}

}  // namespace epq::pager
