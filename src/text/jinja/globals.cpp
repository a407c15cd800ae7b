#include "text/jinja/globals.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "text/jinja/budget.h"
#include "text/jinja/error.h"

namespace epq::text::jinja {
namespace {

Value range(const Arguments& args) {
  if (!args.named.empty()) failure("range() takes no keyword arguments");
  for (const Value& v : args.positional) {
    if (!v.is_number() || v.kind() == Value::Kind::Float) failure("range() arguments must be integers, not '{}'", v.type_name());
  }
  int64_t start = 0, stop = 0, step = 1;
  switch (args.positional.size()) {
    case 1: stop = args.positional[0].as_int(); break;
    case 3: step = args.positional[2].as_int(); [[fallthrough]];
    case 2:
      start = args.positional[0].as_int();
      stop = args.positional[1].as_int();
      break;
    default: failure("range expected 1 to 3 arguments, got {}", args.positional.size());
  }
  if (step == 0) failure("range() step must not be zero");
  const bool up = step > 0;
  if (up ? stop <= start : stop >= start) return Array{};
  const uint64_t span = up ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
  const uint64_t magnitude = up ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  const uint64_t count = (span - 1) / magnitude + 1;
  check_items(static_cast<size_t>(std::min<uint64_t>(count, kMaxItems + 1)));
  WorkBudget::charge(count);
  Array out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) out.emplace_back(static_cast<int64_t>(static_cast<uint64_t>(start) + i * static_cast<uint64_t>(step)));
  return out;
}

// namespace(...) and dict(...): from an optional mapping and keyword arguments.
Value make_object(const Arguments& args, bool is_namespace) {
  Object object(is_namespace);
  if (args.positional.size() > 1) failure("expected at most one positional argument, got {}", args.positional.size());
  if (!args.positional.empty()) {
    if (!args.positional[0].is_object()) failure("expected a mapping, got '{}'", args.positional[0].type_name());
    for (const auto& [key, value] : args.positional[0].object().entries()) object.set(key, value);
  }
  for (const auto& [key, value] : args.named) object.set(key, value);
  return object;
}

std::tm broken_down(const std::optional<std::chrono::local_seconds>& now) {
  std::tm tm{};
  if (!now) {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
    return tm;
  }
  using namespace std::chrono;
  const local_days day = floor<days>(*now);
  const year_month_day date(day);
  const hh_mm_ss time(*now - day);
  tm.tm_year = static_cast<int>(date.year()) - 1900;
  tm.tm_mon = static_cast<int>(static_cast<unsigned>(date.month())) - 1;
  tm.tm_mday = static_cast<int>(static_cast<unsigned>(date.day()));
  tm.tm_hour = static_cast<int>(time.hours().count());
  tm.tm_min = static_cast<int>(time.minutes().count());
  tm.tm_sec = static_cast<int>(time.seconds().count());
  tm.tm_wday = static_cast<int>(weekday(day).c_encoding());
  tm.tm_yday = static_cast<int>((day - local_days(date.year() / January / 1)).count());
  return tm;
}

Value strftime_now(const Arguments& args, const std::optional<std::chrono::local_seconds>& now) {
  const std::string format = args.bind("strftime_now", {"format"})[0].to_string();
  const std::tm tm = broken_down(now);
  for (size_t size = format.size() * 4 + 64; size <= 65536; size *= 2) {
    std::string out(size, '\0');
    const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &tm);
    if (n > 0) {
      out.resize(n);
      return out;
    }
  }
  return "";  // the format makes no characters
}

}  // namespace

Object make_globals(const RenderOptions& options) {
  Object globals;
  globals.set("range", Function{"range", range});
  globals.set("namespace", Function{"namespace", [](const Arguments& args) { return make_object(args, true); }});
  globals.set("dict", Function{"dict", [](const Arguments& args) { return make_object(args, false); }});
  globals.set("raise_exception", Function{"raise_exception", [](const Arguments& args) -> Value {
                throw RaisedError(args.bind("raise_exception", {"message"})[0].to_string());
              }});
  globals.set("strftime_now", Function{"strftime_now", [now = options.now](const Arguments& args) { return strftime_now(args, now); }});
  return globals;
}

}  // namespace epq::text::jinja
