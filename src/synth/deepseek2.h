#pragma once
// Writes a deepseek2 or xing4_0 GGUF with random weights: the metadata keys, tensor names
// and shapes of llama.cpp's current converters for MLA models (attn_k_b / attn_v_b, one
// KV head of kv_lora + rope values, YaRN with the log multiplier, sigmoid routing with a
// selection bias and expert groups, an ungated shared expert, leading dense layers), and
// for xing4_0 four hyper-connection streams per sub-layer and one trailing MTP block.
#include <string>

#include "synth/options.h"
#include "synth/tensor_stream.h"

namespace epq::synth {

void write_deepseek2(const Options& options, const std::string& path, const ProgressFn& on_progress);

}  // namespace epq::synth
