#pragma once
// Writes a qwen35moe GGUF (Qwen3.5 / Qwen3.6 MoE) with random weights: the metadata keys,
// tensor names, shapes and F32 roles that llama.cpp's converter and quantizer write for
// this Gated DeltaNet hybrid (layer il is full attention iff (il+1) % interval == 0, the
// rest linear attention; every layer routed MoE plus a sigmoid-gated shared expert),
// the synthesizer's BPE tokenizer (pre-tokenizer "qwen35") and a ChatML template.
//
// Stored values follow the converter's conventions: norm weights near 1 (the +1 of the
// zero-centred HF norms already added; ssm_norm is plain), ssm_a = -exp(A_log) < 0, a
// modest dt bias and conv taps of scale 1/sqrt(kernel), so that random models stay
// numerically tame over long sequences.
#include <string>

#include "synth/options.h"
#include "synth/tensor_stream.h"

namespace epq::synth {

void write_qwen35moe(const Options& options, const std::string& path, const ProgressFn& on_progress);

}  // namespace epq::synth
