#pragma once
// Rotary position embedding, NEOX layout (dimension i pairs with i + n_dims/2) or NORM
// layout (dimension 2i pairs with 2i + 1, DeepSeek's MLA), with
// optional YaRN scaling, following ggml's rope_yarn: the angle of pair i at position p
// is p * base^(-2i/n_dims), computed by repeated multiplication as ggml does.
#include <cstdint>
#include <vector>

namespace epq {

struct RopeParams {
  int n_dims = 0;
  bool neox = true;  // false: NORM (adjacent) pairs
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / scaling factor
  float ext_factor = 0.0f;  // YaRN extrapolation mix (1 for yarn, 0 otherwise)
  float attn_factor = 1.0f;
  float beta_fast = 32.0f, beta_slow = 1.0f;
  int n_ctx_orig = 0;
};

// Cos/sin tables for a batch of positions, shared by every head and layer.
class RopeTable {
 public:
  explicit RopeTable(const RopeParams& params);
  // Computes the tables for positions[0..n).
  void compute(const int32_t* positions, int64_t n);
  // Rotates one head vector (n_dims floats) in place for the i-th computed position.
  void apply(float* head, int64_t i) const;

 private:
  RopeParams p_;
  float corr_low_ = 0, corr_high_ = 0;
  std::vector<float> cos_, sin_;
};

}  // namespace epq
