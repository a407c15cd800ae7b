#pragma once
// Reading an architecture's hyperparameters from GGUF metadata, with every value checked:
// counts must be positive and sane, reals finite and inside a range, so a malformed file
// is refused with one line naming the key instead of sizing buffers from garbage.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/rope.h"
#include "gguf/file.h"

namespace epq::models {

class HparamReader {
 public:
  // Keys are read as "<arch>.<key>".
  HparamReader(const gguf::File& file, std::string arch) : f_(file), prefix_(std::move(arch) + ".") {}

  // A count in [1, 2^30]; the _or forms take `fallback` when the key is absent.
  int count(const std::string& key) const;
  int count_or(const std::string& key, int64_t fallback) const;
  // A count that may be 0 (e.g. the number of MTP layers).
  int count_or_zero(const std::string& key) const;
  // A real in [lo, hi]: NaN, infinities and absurd values are refused.
  float real(const std::string& key, double lo, double hi) const;
  float real_or(const std::string& key, double fallback, double lo, double hi) const;
  bool has(const std::string& key) const { return f_.find(prefix_ + key) != nullptr; }
  std::string key(const std::string& key) const { return prefix_ + key; }
  // An integer array of exactly n counts (each >= 0).
  std::vector<int> int_array(const std::string& key, size_t n) const;
  // A count per layer: an array of n_layer counts, or one count for every layer.
  std::vector<int> per_layer(const std::string& key, int n_layer) const;

  // The vocabulary size: the tokenizer's token count, or "<arch>.vocab_size".
  int vocab_size() const;
  // Rotary embedding of n_dims dimensions: base, and linear or YaRN scaling if present.
  RopeParams rope(int n_dims, int n_ctx_train) const;
  // The router's top-k, or the --expert-used override (checked against n_expert).
  int expert_used(int n_expert, const std::optional<int>& override_k) const;

  const gguf::File& file() const { return f_; }

 private:
  int checked(const std::string& key, int64_t v, int64_t lo) const;
  float checked_real(const std::string& key, double v, double lo, double hi) const;
  const gguf::File& f_;
  std::string prefix_;
};

}  // namespace epq::models
