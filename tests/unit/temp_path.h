#pragma once
// A path in the temporary directory unique to this test process: ctest runs test cases
// in parallel processes, which must not share files.
#include <unistd.h>

#include <filesystem>
#include <string>

namespace epq::testing {

inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("epq-" + std::to_string(getpid()) + "-" + name)).string();
}

}  // namespace epq::testing
