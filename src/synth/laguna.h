#pragma once
// Writes a laguna GGUF (poolside Laguna) with random weights: the metadata keys, tensor
// names and shapes that llama.cpp's converter writes (per-layer head counts as an array,
// a sliding window with the default pattern 4, YaRN on full layers, sigmoid routing with
// a selection bias, normalised and scaled by 2.5), the synthesizer's BPE tokenizer
// (pre-tokenizer "laguna") and a ChatML template.
#include <string>

#include "synth/options.h"
#include "synth/tensor_stream.h"

namespace epq::synth {

void write_laguna(const Options& options, const std::string& path, const ProgressFn& on_progress);

}  // namespace epq::synth
