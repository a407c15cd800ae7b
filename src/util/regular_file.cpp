#include "util/regular_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/format.h"

namespace epq {

int try_open_regular_file(const std::string& path, int flags, struct stat* st) {
  const int fd = ::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    const bool is_dir = S_ISDIR(st->st_mode);
    ::close(fd);
    fail("{}: not a regular file{}", path, is_dir ? " (a directory)" : "");
  }
  // O_NONBLOCK only kept the open from blocking; reads of regular files ignore it.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

int open_regular_file(const std::string& path, int flags, struct stat* st) {
  const int fd = try_open_regular_file(path, flags, st);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  return fd;
}

std::string read_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  struct stat st {};
  const int fd = open_regular_file(path, O_RDONLY, &st);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    fail("{} '{}' is {}, more than the limit of {}", what, path, format_bytes(size), format_bytes(max_bytes));
  }
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      fail("{} '{}': {}", what, path, n < 0 ? std::strerror(err) : "the file shrank while it was read");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
}

}  // namespace epq
