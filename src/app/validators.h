#pragma once
// CLI11 checks that the stock ones lack: CLI::Range lets NaN through (every comparison
// with NaN is false), so floating-point flags use finite_range.
#include <CLI/CLI.hpp>

namespace epq::app {

// A number x with lo <= x <= hi (so never NaN or infinite).
CLI::Validator finite_range(double lo, double hi);

}  // namespace epq::app
