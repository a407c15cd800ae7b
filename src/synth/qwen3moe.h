#pragma once
// Writes a qwen3moe GGUF with random weights: every metadata key and tensor that
// llama.cpp's qwen3moe loader reads, a byte-level BPE tokenizer and a ChatML template.
// Tensors are generated and quantized in bounded chunks and streamed to disk.
#include <string>

#include "synth/options.h"
#include "synth/tensor_stream.h"

namespace epq::synth {

void write_qwen3moe(const Options& options, const std::string& path, const ProgressFn& on_progress);

}  // namespace epq::synth
