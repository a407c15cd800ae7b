#pragma once
// The tokenizer keys every synthesized file carries: the byte-level BPE vocabulary of
// vocab.h (padded to options.n_vocab where asked), its special token ids, and a ChatML
// chat template. Only the pre-tokenizer name differs between architectures.
#include <string>

#include "gguf/writer.h"
#include "synth/options.h"

namespace epq::synth {

// Number of tokens the file's vocabulary has for these options.
int vocab_size(const Options& options);

// Sets tokenizer.ggml.* and tokenizer.chat_template; pre is tokenizer.ggml.pre.
void set_tokenizer_metadata(gguf::Writer& w, const Options& options, const std::string& pre);

// The ChatML template written into synthesized files.
const char* chatml_template();

}  // namespace epq::synth
