#include "pager/model_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/buffer.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace epq::pager {

ModelFile::ModelFile(const std::string& path, bool force_buffered) : path_(path) {
  struct stat st {};
  if (!force_buffered) {
    fd_ = try_open_regular_file(path, O_RDONLY | O_DIRECT, &st);
    if (fd_ >= 0) {
      // Some filesystems accept the flag at open and fail reads; try one block.
      Buffer probe(kDirectAlign);
      if (::pread(fd_, probe.data(), kDirectAlign, 0) < 0) {
        fallback_reason_ = std::string("O_DIRECT reads fail: ") + std::strerror(errno);
        ::close(fd_);
        fd_ = -1;
      } else {
        direct_ = true;
      }
    } else {
      fallback_reason_ = std::string("O_DIRECT open fails: ") + std::strerror(errno);
    }
  } else {
    fallback_reason_ = "buffered reads were requested";
  }
  if (fd_ < 0) {
    fd_ = open_regular_file(path, O_RDONLY, &st);
    posix_fadvise(fd_, 0, 0, POSIX_FADV_RANDOM);  // no readahead: only what is read enters the cache
  }
  if (fstat(fd_, &st) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
  size_ = static_cast<uint64_t>(st.st_size);
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  mtime_ns_ = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
}

ModelFile::~ModelFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ModelFile::read_aligned(uint64_t offset, size_t length, uint8_t* dest, size_t needed) const {
  size_t done = 0;
  while (done < needed) {
    const ssize_t n = ::pread(fd_, dest + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) read_failed(offset, needed, n < 0 ? -errno : static_cast<long>(done));
    done += static_cast<size_t>(n);
    if (direct_ && done % kDirectAlign != 0) break;  // a direct read ends short only at end of file
  }
  if (done < needed) read_failed(offset, needed, static_cast<long>(done));
  after_read(offset, length);
}

void ModelFile::after_read(uint64_t offset, size_t length) const {
  if (!direct_) posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(length), POSIX_FADV_DONTNEED);
}

void ModelFile::read_failed(uint64_t offset, size_t needed, long result) const {
  struct stat st {};
  const bool gone = ::stat(path_.c_str(), &st) != 0;
  const int64_t mtime = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  if (gone || st.st_ino != ino_ || st.st_dev != dev_ || static_cast<uint64_t>(st.st_size) != size_ || mtime != mtime_ns_) {
    fail("{}: the model file changed on disk while running (size {} -> {}); restart epq with the new file", path_, size_,
         gone ? 0 : st.st_size);
  }
  if (result < 0) fail("{}: read of {} bytes at offset {} failed: {}", path_, needed, offset, std::strerror(static_cast<int>(-result)));
  fail("{}: short read at offset {}: {} of {} bytes; the file may be truncated or damaged", path_, offset, result, needed);
}

}  // namespace epq::pager
