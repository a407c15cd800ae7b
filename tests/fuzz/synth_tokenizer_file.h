#pragma once
// The tokenizer keys of a synthesized model (synth/tokenizer_metadata.h: byte-level BPE
// with all 256 byte tokens, merges learned from the synth corpus, ChatML specials and
// template), with tokenizer.ggml.pre = pre, as a parsed GGUF. Fuzz targets build it once,
// at start-up, through a temporary file that is removed at once.
#include <string>

#include "gguf/file.h"

namespace epq::fuzz {

gguf::File synth_tokenizer_file(const std::string& pre);

}  // namespace epq::fuzz
