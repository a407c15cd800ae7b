#pragma once
// Pieces of a tensor plan that several architectures share, in llama.cpp's converter
// order, with the synthesizer's scales: a projection's weights are N(0, 1/fan_in), and
// those writing into the residual stream are scaled down by a further sqrt(2 * layers),
// so that deep random models keep their input.
#include <cstdint>
#include <string>
#include <vector>

#include "synth/options.h"
#include "synth/tensor_stream.h"

namespace epq::synth {

// 1 / sqrt(fan_in), and that / sqrt(2 * layers) for what writes into the residual stream.
float input_scale(int64_t fan_in);
float residual_scale(const Options& o, int64_t fan_in);

// token_embd, output_norm and (unless tied) output.
void add_global_tensors(std::vector<TensorPlan>& t, const Options& o);

struct MoeTensors {
  bool selection_bias = false;  // exp_probs_b
  int64_t n_ff_shared = 0;      // 0: no shared expert
  bool gated_shared = false;    // ffn_gate_inp_shexp
};
// Layer l's router, routed experts and shared expert.
void add_moe_tensors(std::vector<TensorPlan>& t, const Options& o, int l, const MoeTensors& moe);
// Layer l's dense SwiGLU FFN of n_ff (types of the shared expert).
void add_dense_ffn_tensors(std::vector<TensorPlan>& t, const Options& o, int l, int64_t n_ff);

}  // namespace epq::synth
