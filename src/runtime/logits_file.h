#pragma once
// The logits file `epq perplexity --logits-out` writes and `--compare` reads, to compare
// two engines, two quantizations, or paged and resident runs position by position.
//
// Layout (little-endian):
//   char[4]  magic "EPQL"
//   uint32   version (1)
//   uint32   n_vocab
//   uint32   n_positions
//   int32    targets[n_positions]     the token each scored position predicts
//   float32  logits[n_positions][n_vocab]
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace epq::runtime {

class LogitsWriter {
 public:
  LogitsWriter(const std::string& path, uint32_t n_vocab);
  ~LogitsWriter();
  LogitsWriter(const LogitsWriter&) = delete;
  LogitsWriter& operator=(const LogitsWriter&) = delete;
  void add(int32_t target, const float* logits);
  void finish();  // writes the header with the final count and closes the file

 private:
  std::string path_;
  uint32_t n_vocab_;
  std::FILE* logits_ = nullptr;  // logits go to a temporary file, targets stay in memory
  std::string temp_path_;
  std::vector<int32_t> targets_;
};

struct LogitsFile {
  uint32_t n_vocab = 0;
  std::vector<int32_t> targets;
  std::vector<float> logits;  // n_positions * n_vocab
};
LogitsFile read_logits_file(const std::string& path);

struct LogitsComparison {
  size_t positions = 0;
  double mean_kl = 0, max_kl = 0;  // KL(reference || this run), nats
  double top1_agreement = 0;       // fraction of positions with the same argmax
  double max_abs_diff = 0;         // largest |logit difference|
  double ppl_reference = 0, ppl_this = 0;
};

class LogitsComparer {
 public:
  explicit LogitsComparer(LogitsFile reference) : ref_(std::move(reference)) {}
  // Compares this run's logits at scored position `index` (predicting `target`).
  void add(size_t index, int32_t target, const float* logits);
  LogitsComparison result() const;
  size_t size() const { return ref_.targets.size(); }
  uint32_t n_vocab() const { return ref_.n_vocab; }

 private:
  LogitsFile ref_;
  LogitsComparison c_;
  double nll_ref_ = 0, nll_this_ = 0;
};

}  // namespace epq::runtime
