#include "models/hparams.h"

#include "util/error.h"

namespace epq::models {

int HparamReader::checked(const std::string& key, int64_t v, int64_t lo) const {
  if (v < lo || v > (int64_t{1} << 30)) fail("{}: metadata '{}' = {} is out of range", f_.path(), key, v);
  return static_cast<int>(v);
}

float HparamReader::checked_real(const std::string& key, double v, double lo, double hi) const {
  if (!(v >= lo && v <= hi)) fail("{}: metadata '{}' = {} is out of range ({} to {})", f_.path(), key, v, lo, hi);
  return static_cast<float>(v);
}

int HparamReader::count(const std::string& key) const { return checked(prefix_ + key, f_.get_int(prefix_ + key), 1); }

int HparamReader::count_or(const std::string& key, int64_t fallback) const {
  return checked(prefix_ + key, f_.get_int_or(prefix_ + key, fallback), 1);
}

int HparamReader::count_or_zero(const std::string& key) const { return checked(prefix_ + key, f_.get_int_or(prefix_ + key, 0), 0); }

float HparamReader::real(const std::string& key, double lo, double hi) const {
  return checked_real(prefix_ + key, f_.get_float(prefix_ + key), lo, hi);
}

float HparamReader::real_or(const std::string& key, double fallback, double lo, double hi) const {
  return checked_real(prefix_ + key, f_.get_float_or(prefix_ + key, fallback), lo, hi);
}

std::vector<int> HparamReader::int_array(const std::string& key, size_t n) const {
  const std::string name = prefix_ + key;
  const gguf::Value* v = f_.find(name);
  if (v == nullptr) fail("{}: missing metadata '{}'", f_.path(), name);
  if (v->type() != gguf::ValueType::ARRAY || v->ints().size() != n) fail("{}: metadata '{}' must be an array of {} integers", f_.path(), name, n);
  std::vector<int> out;
  for (int64_t x : v->ints()) out.push_back(checked(name, x, 0));
  return out;
}

std::vector<int> HparamReader::per_layer(const std::string& key, int n_layer) const {
  const gguf::Value* v = f_.find(prefix_ + key);
  if (v == nullptr || v->type() != gguf::ValueType::ARRAY) return std::vector<int>(static_cast<size_t>(n_layer), count(key));
  std::vector<int> out = int_array(key, static_cast<size_t>(n_layer));
  for (int x : out) checked(prefix_ + key, x, 1);
  return out;
}

int HparamReader::vocab_size() const {
  int n = 0;
  if (f_.find("tokenizer.ggml.tokens")) {
    n = checked("tokenizer.ggml.tokens", static_cast<int64_t>(f_.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING).size()), 1);
  }
  return count_or("vocab_size", n);
}

RopeParams HparamReader::rope(int n_dims, int n_ctx_train) const {
  RopeParams r;
  r.n_dims = n_dims;
  r.freq_base = real_or("rope.freq_base", 10000.0, 1, 1e12);
  r.n_ctx_orig = count_or("rope.scaling.original_context_length", n_ctx_train);
  r.attn_factor = real_or("rope.scaling.attn_factor", 1.0, 1e-3, 1e3);
  const std::string scaling = f_.get_string_or(prefix_ + "rope.scaling.type", "none");
  const double factor = real_or("rope.scaling.factor", 0.0, 0, 1e6);
  if (scaling == "yarn" || scaling == "linear") {
    r.freq_scale = factor > 0 ? static_cast<float>(1.0 / factor) : 1.0f;
    r.ext_factor = scaling == "yarn" ? 1.0f : 0.0f;
  } else if (scaling != "none") {
    fail("{}: rope scaling type '{}' is not supported (none, linear, yarn)", f_.path(), scaling);
  }
  return r;
}

int HparamReader::expert_used(int n_expert, const std::optional<int>& override_k) const {
  const int k = count("expert_used_count");
  if (override_k) {
    if (*override_k < 1 || *override_k > n_expert) {
      fail("--expert-used {} is out of range: the model has {} experts per layer", *override_k, n_expert);
    }
    return *override_k;
  }
  if (k > n_expert) fail("{}: expert_used_count {} exceeds expert_count {}", f_.path(), k, n_expert);
  return k;
}

}  // namespace epq::models
