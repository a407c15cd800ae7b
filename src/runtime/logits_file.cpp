#include "runtime/logits_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "util/error.h"
#include "util/regular_file.h"

namespace epq::runtime {
namespace {

constexpr char kMagic[4] = {'E', 'P', 'Q', 'L'};
constexpr uint32_t kVersion = 1;

std::vector<double> log_softmax(const float* logits, uint32_t n) {
  const float max = *std::max_element(logits, logits + n);
  double sum = 0;
  for (uint32_t i = 0; i < n; ++i) sum += std::exp(double{logits[i]} - max);
  const double log_sum = std::log(sum) + max;
  std::vector<double> out(n);
  for (uint32_t i = 0; i < n; ++i) out[i] = logits[i] - log_sum;
  return out;
}

}  // namespace

LogitsWriter::LogitsWriter(const std::string& path, uint32_t n_vocab) : path_(path), n_vocab_(n_vocab), temp_path_(path + ".partial") {
  logits_ = std::fopen(temp_path_.c_str(), "wb");
  if (logits_ == nullptr) fail("cannot create {}: {}", temp_path_, std::strerror(errno));
}

LogitsWriter::~LogitsWriter() {
  if (logits_ != nullptr) {
    std::fclose(logits_);
    std::remove(temp_path_.c_str());
  }
}

void LogitsWriter::add(int32_t target, const float* logits) {
  targets_.push_back(target);
  if (std::fwrite(logits, sizeof(float), n_vocab_, logits_) != n_vocab_) fail("write to {} failed", temp_path_);
}

void LogitsWriter::finish() {
  std::fclose(logits_);
  logits_ = nullptr;
  std::ifstream body(temp_path_, std::ios::binary);
  std::ofstream out(path_, std::ios::binary);
  if (!out) fail("cannot create {}", path_);
  const uint32_t header[3] = {kVersion, n_vocab_, static_cast<uint32_t>(targets_.size())};
  out.write(kMagic, 4);
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  out.write(reinterpret_cast<const char*>(targets_.data()), static_cast<std::streamsize>(targets_.size() * sizeof(int32_t)));
  out << body.rdbuf();
  if (!out.flush()) fail("write to {} failed", path_);
  std::remove(temp_path_.c_str());
}

LogitsFile read_logits_file(const std::string& path) {
  struct stat st {};
  ::close(open_regular_file(path, O_RDONLY, &st));  // a FIFO would block the stream's open
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("cannot open logits file {}", path);
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  char magic[4] = {};
  uint32_t header[3] = {};
  in.read(magic, 4);
  in.read(reinterpret_cast<char*>(header), sizeof header);
  if (!in || std::memcmp(magic, kMagic, 4) != 0) fail("{}: not an EPQ logits file (bad magic)", path);
  if (header[0] != kVersion) fail("{}: unsupported logits file version {}", path, header[0]);
  LogitsFile f;
  f.n_vocab = header[1];
  const uint64_t n = header[2];
  const uint64_t row = 4 + uint64_t{f.n_vocab} * 4;  // a target and its logits; no product below can overflow
  if (f.n_vocab == 0 || size < 16 || (size - 16) % row != 0 || (size - 16) / row != n) {
    fail("{}: truncated or corrupt: {} bytes for {} positions of {} logits", path, size, n, f.n_vocab);
  }
  f.targets.resize(n);
  f.logits.resize(n * f.n_vocab);
  in.read(reinterpret_cast<char*>(f.targets.data()), static_cast<std::streamsize>(n * 4));
  in.read(reinterpret_cast<char*>(f.logits.data()), static_cast<std::streamsize>(f.logits.size() * 4));
  if (!in) fail("{}: read failed", path);
  return f;
}

void LogitsComparer::add(size_t index, int32_t target, const float* logits) {
  if (index >= ref_.targets.size()) fail("this run scores more positions than the reference file ({})", ref_.targets.size());
  if (ref_.targets[index] != target) {
    fail("position {} predicts token {} here but {} in the reference file: the texts or tokenizers differ", index, target,
         ref_.targets[index]);
  }
  const uint32_t n = ref_.n_vocab;
  const float* ref = ref_.logits.data() + index * n;
  const std::vector<double> lp = log_softmax(ref, n), lq = log_softmax(logits, n);
  double kl = 0;
  for (uint32_t i = 0; i < n; ++i) {
    kl += std::exp(lp[i]) * (lp[i] - lq[i]);
    c_.max_abs_diff = std::max(c_.max_abs_diff, std::fabs(double{ref[i]} - logits[i]));
  }
  c_.positions++;
  c_.mean_kl += kl;
  c_.max_kl = std::max(c_.max_kl, kl);
  c_.top1_agreement += std::max_element(ref, ref + n) - ref == std::max_element(logits, logits + n) - logits;
  nll_ref_ -= lp[static_cast<size_t>(target)];
  nll_this_ -= lq[static_cast<size_t>(target)];
}

LogitsComparison LogitsComparer::result() const {
  LogitsComparison r = c_;
  if (r.positions) {
    const double n = static_cast<double>(r.positions);
    r.mean_kl /= n;
    r.top1_agreement /= n;
    r.ppl_reference = std::exp(nll_ref_ / n);
    r.ppl_this = std::exp(nll_this_ / n);
  }
  return r;
}

}  // namespace epq::runtime
