#pragma once
// Byte-level BPE tokenizer ("gpt2" model in GGUF): the vocabulary, merges and special
// tokens come from the file's tokenizer.ggml.* metadata. Text is split around special
// tokens, pre-tokenized by regex, mapped to GPT-2's byte alphabet and merged by rank.
// decode(encode(text)) == text for any bytes.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/file.h"
#include "text/pretokenizer.h"

namespace epq::text {

class Tokenizer {
 public:
  static Tokenizer from_gguf(const gguf::File& file);

  // Token ids for text (no BOS). With parse_special, control tokens written in the text
  // (e.g. "<|im_start|>") become their ids; user-defined tokens always do.
  std::vector<int32_t> encode(std::string_view text, bool parse_special) const;
  // A prompt: encode() behind a BOS token when the model wants one (add_bos) and the
  // text does not already start with it (chat templates often write it).
  std::vector<int32_t> encode_prompt(std::string_view text, bool parse_special) const;
  // The bytes a token stands for. Control tokens give their text only if render_special.
  std::string token_text(int32_t id, bool render_special) const;
  std::string decode(std::span<const int32_t> ids, bool render_special) const;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& piece(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  std::optional<int32_t> find(std::string_view piece) const;
  bool is_control(int32_t id) const;
  // End of generation: EOS, EOT, or a control token that ends a turn.
  bool is_eog(int32_t id) const;
  std::optional<int32_t> bos() const { return bos_; }
  std::optional<int32_t> eos() const { return eos_; }
  bool add_bos() const { return add_bos_; }
  const std::string& pre_name() const { return pre_name_; }
  // No token stands for more bytes of text than this, so a text of n bytes has at least
  // n / longest_token_bytes() tokens.
  size_t longest_token_bytes() const { return longest_token_bytes_; }

 private:
  Tokenizer() = default;
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;
  std::vector<int32_t> types_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" -> rank
  std::vector<int32_t> specials_;  // control and user-defined tokens, longest first
  std::vector<int32_t> eog_;
  std::optional<int32_t> bos_, eos_;
  bool add_bos_ = false;
  std::string pre_name_;
  size_t longest_token_bytes_ = 1;
  std::optional<PreTokenizer> pre_;
};

}  // namespace epq::text
