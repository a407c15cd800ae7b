#pragma once
// Memory-mapped model files and SIGBUS. Touching a page of a mapping past the end of a
// file that shrank after it was mapped raises SIGBUS, which would kill the process with
// no word of why. While a range is guarded, SIGBUS on it prints one error line naming
// the file and exits with status 1; SIGBUS anywhere else keeps its default action.
#include <cstddef>
#include <string>

namespace epq {

// Guards [addr, addr + size) for path; at most kMaxGuardedMappings at once (more are
// left unguarded).
void guard_mapping(const void* addr, size_t size, const std::string& path);
void unguard_mapping(const void* addr);

inline constexpr int kMaxGuardedMappings = 256;  // one per mapped file, the shards of a split model too

}  // namespace epq
