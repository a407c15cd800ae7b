#pragma once
// Builds the byte-level BPE vocabulary that synthesized models carry: the 256 byte tokens
// in GPT-2 byte-to-unicode form, merges learned from the training corpus, and ChatML
// special tokens. Deterministic: the same n_merges always gives the same vocabulary.
// A vocabulary can be padded to a real model's size (the corpus yields at most a few
// hundred merges) with unused "[PAD<id>]" tokens after the special ones, as the HF
// converter pads vocabularies whose config is larger than the tokenizer.
#include <cstdint>
#include <string>
#include <vector>

namespace epq::synth {

// GGUF token types (tokenizer.ggml.token_type).
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;  // "left right", best first
  int32_t endoftext_id = -1;        // <|endoftext|>: BOS and padding
  int32_t im_start_id = -1;
  int32_t im_end_id = -1;  // end of turn: the EOS token
};

// n_vocab > the learned size pads to n_vocab tokens; a smaller n_vocab (or 0) pads nothing.
Vocab make_vocab(int n_merges, int n_vocab = 0);

}  // namespace epq::synth
