#pragma once
// The model file opened for direct reads that bypass the page cache (O_DIRECT). Where
// the filesystem refuses O_DIRECT (e.g. tmpfs), reads are buffered and each read range is
// dropped from the page cache afterwards with posix_fadvise(DONTNEED); `direct()` tells
// which. The file's identity (inode, size, mtime) is recorded at open, so a file that is
// replaced or truncated while running is reported as such.
#include <sys/types.h>

#include <cstdint>
#include <string>

namespace epq::pager {

inline constexpr uint64_t kDirectAlign = 4096;  // offset, length and address alignment for O_DIRECT

class ModelFile {
 public:
  // force_buffered skips O_DIRECT (for tests of the fallback path).
  explicit ModelFile(const std::string& path, bool force_buffered = false);
  ~ModelFile();
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;

  int fd() const { return fd_; }
  bool direct() const { return direct_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Why reads are buffered (empty when direct).
  const std::string& fallback_reason() const { return fallback_reason_; }

  // Blocking read of [offset, offset + length) into dest, all three aligned to
  // kDirectAlign; succeeds if at least `needed` bytes arrive. Throws a clear Error.
  void read_aligned(uint64_t offset, size_t length, uint8_t* dest, size_t needed) const;
  // After a read completed: drop its pages from the page cache if reads are buffered.
  void after_read(uint64_t offset, size_t length) const;
  // Throws an Error describing a failed or short read, naming a changed file if it changed.
  [[noreturn]] void read_failed(uint64_t offset, size_t needed, long result) const;

 private:
  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
  std::string fallback_reason_;
  uint64_t size_ = 0;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  int64_t mtime_ns_ = 0;
};

inline uint64_t align_down(uint64_t v) { return v / kDirectAlign * kDirectAlign; }
inline uint64_t align_up(uint64_t v) { return (v + kDirectAlign - 1) / kDirectAlign * kDirectAlign; }

}  // namespace epq::pager
