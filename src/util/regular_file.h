#pragma once
// Opening files the user names. Each must be a regular file: a FIFO, a device or a
// directory gets one error line instead of a hang (opening a FIFO for reading blocks
// until a writer appears, so the open itself does not block).
#include <sys/stat.h>

#include <cstdint>
#include <string>

namespace epq {

// open(2) with flags (O_RDONLY, O_DIRECT, ...); fills *st. Throws Error naming path.
int open_regular_file(const std::string& path, int flags, struct stat* st);
// The same, but an open that fails returns -1 with errno set (for opens that have a
// fallback, such as O_DIRECT); a file that is not regular still throws.
int try_open_regular_file(const std::string& path, int flags, struct stat* st);

// The whole file as bytes; `what` names it in errors ("prompt file"). Files larger than
// max_bytes are refused before they are read.
std::string read_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes = uint64_t{1} << 32);

}  // namespace epq
