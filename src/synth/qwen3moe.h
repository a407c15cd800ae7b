#pragma once
// Writes a qwen3moe GGUF with random weights: every metadata key and tensor that
// llama.cpp's qwen3moe loader reads, a byte-level BPE tokenizer and a ChatML template.
// Tensors are generated and quantized in bounded chunks and streamed to disk.
#include <functional>
#include <string>

#include "synth/options.h"

namespace epq::synth {

struct Progress {
  int tensor = 0;  // 1-based index of the tensor being written
  int n_tensors = 0;
  const char* name = "";
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
};

void write_qwen3moe(const Options& options, const std::string& path,
                    const std::function<void(const Progress&)>& on_progress);

// The ChatML template written into synthesized files.
const char* chatml_template();

}  // namespace epq::synth
