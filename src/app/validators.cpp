#include "app/validators.h"

#include <fmt/format.h>

#include <cstdlib>

namespace epq::app {

CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0') return fmt::format("expected a number, got '{}'", text);
        if (!(x >= lo && x <= hi)) return fmt::format("{} is not between {} and {}", text, lo, hi);
        return {};
      },
      fmt::format("NUMBER in [{} - {}]", lo, hi));
}

}  // namespace epq::app
