#pragma once
// The general.* keys of a synthesized file: its architecture, name, a description that
// says the weights are random, and general.file_type (llama_ftype) named by the routed
// experts' type as llama.cpp's quantizer names its mixes (Q4_K experts: Q4_K_M).
#include "gguf/writer.h"
#include "synth/options.h"

namespace epq::synth {

void set_general_metadata(gguf::Writer& w, const Options& o);

}  // namespace epq::synth
