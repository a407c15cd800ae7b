#include "pager/io_probe.h"

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "pager/io_engine.h"
#include "pager/shard_files.h"
#include "util/buffer.h"
#include "util/error.h"

namespace epq::pager {

bool direct_io_works(const std::string& path, std::string* reason) {
  ModelFile f(path);
  if (!f.direct() && reason) *reason = f.fallback_reason();
  return f.direct();
}

ProbeResult probe_read_rate(const std::string& path, uint64_t request_bytes, int depth, bool direct, double seconds) {
  const ShardFiles files({path}, !direct);
  const ModelFile& file = files[0];
  if (direct && !file.direct()) fail("{}: {}", path, file.fallback_reason());
  request_bytes = std::max<uint64_t>(kDirectAlign, align_up(request_bytes));
  if (file.size() < request_bytes) fail("{}: the file is smaller than one {}-byte request", path, request_bytes);
  if (!direct) posix_fadvise(file.fd(), 0, 0, POSIX_FADV_DONTNEED);
  Buffer buffer(static_cast<size_t>(request_bytes) * static_cast<size_t>(depth));
  const IoRegion region{buffer.data(), buffer.size()};
  IoOptions options;
  options.queue_depth = depth;
  std::string note;
  auto io = make_io_engine(files, options, {&region, 1}, &note);

  std::mt19937_64 rng(12345);
  const uint64_t slots = (file.size() - request_bytes) / kDirectAlign + 1;
  auto request = [&](uint64_t tag) {
    const uint64_t offset = rng() % slots * kDirectAlign;
    const ReadRequest r{0, offset, static_cast<uint32_t>(request_bytes), buffer.data() + tag * request_bytes, tag};
    io->submit({&r, 1});
    return offset;
  };
  std::vector<uint64_t> offsets(static_cast<size_t>(depth));
  ProbeResult result{request_bytes, depth, file.direct()};
  const uint64_t max_bytes = std::min<uint64_t>(uint64_t{4} << 30, 2 * file.size());
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (int t = 0; t < depth; ++t) offsets[static_cast<size_t>(t)] = request(static_cast<uint64_t>(t));
  std::vector<ReadCompletion> done;
  bool stopping = false;
  while (io->in_flight() > 0) {
    done.clear();
    io->reap(done, true);
    for (const ReadCompletion& c : done) {
      if (c.result < 0) file.read_failed(offsets[c.tag], request_bytes, static_cast<long>(c.result));
      result.bytes += static_cast<uint64_t>(c.result);
      file.after_read(offsets[c.tag], request_bytes);
      stopping = stopping || elapsed() >= seconds || result.bytes >= max_bytes;
      if (!stopping) offsets[c.tag] = request(c.tag);
    }
  }
  result.seconds = elapsed();
  return result;
}

}  // namespace epq::pager
