#pragma once
// general.file_type (llama_ftype) of a synthesized mix, named by its routed experts' type
// as llama.cpp's quantizer names its mixes (Q4_K experts: Q4_K_M).
#include "quant/types.h"

namespace epq::synth {

int file_type(quant::Type expert);

}  // namespace epq::synth
