#pragma once
// The gated delta rule of Gated DeltaNet, for one value head over a run of tokens. With
// state S [key x value] (key-major: S[i][j] at S + i * dim + j), per token t:
//   S  = exp(g_t) S                          decay first
//   d  = beta_t (v_t - S^T k_t)              the prediction error with the decayed state
//   S += k_t d^T                             rank-1 update
//   o_t = S^T q_t                            read with the updated state
// q is expected pre-scaled (by 1/sqrt(dim)); q and k are read at q + t * qk_stride, v at
// v + t * v_stride, o written at o + t * o_stride.
//
// dim must be a multiple of 8, at most 512. delta_rule_recurrent runs that loop (AVX2); a token's result does not depend on how a sequence
// is split into calls, so a resumed prefix gives the same bits as a fresh run. delta_rule_chunked computes the same in chunks of
// up to kDeltaChunk tokens with matrix products (the WY form, as in llama.cpp's
// build_delta_net_chunking), rounding differently but agreeing within float tolerance:
//   G_t = sum_{u<=t} g_u (in the chunk);  A[t][s] = beta_t (k_t.k_s) e^{G_t-G_s}, s < t
//   U = (I+A)^-1 (beta v),  W = (I+A)^-1 (beta e^G k)      (forward substitution)
//   V' = U - W S_prev
//   o_t = e^{G_t} q_t^T S_prev + sum_{s<=t} (q_t.k_s) e^{G_t-G_s} V'_s
//   S_next = e^{G_last} S_prev + sum_s e^{G_last-G_s} k_s V'_s^T
#include <cstddef>
#include <cstdint>

namespace epq {

inline constexpr int kDeltaChunk = 64;

struct DeltaRuleInput {
  const float* q;
  const float* k;
  const float* v;
  const float* g;     // log-space decay per token (<= 0), at g + t * gb_stride
  const float* beta;  // at beta + t * gb_stride
  size_t qk_stride, v_stride, gb_stride;
};

void delta_rule_recurrent(const DeltaRuleInput& in, int64_t n_tokens, int dim, float* state, float* o, size_t o_stride);

// Floats of scratch delta_rule_chunked needs.
size_t delta_rule_chunk_scratch(int dim);
void delta_rule_chunked(const DeltaRuleInput& in, int64_t n_tokens, int dim, float* state, float* o, size_t o_stride, float* scratch);

}  // namespace epq
