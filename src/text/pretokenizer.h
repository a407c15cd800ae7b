#pragma once
// Splits text into the pieces BPE merges within, using the regexes llama.cpp selects by
// tokenizer.ggml.pre. Regexes apply in sequence: each splits the pieces the previous one
// made, and text a regex does not match stays a piece of its own (as in llama.cpp).
// Matching uses PCRE2 in UTF + Unicode-property mode; invalid UTF-8 never matches.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace epq::text {

class PreTokenizer {
 public:
  // Throws Error for a `pre` value it does not know; lists the known ones.
  explicit PreTokenizer(const std::string& pre);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  std::vector<std::string_view> split(std::string_view text) const;
  // True for presets whose words are looked up whole before merging (llama3).
  bool ignore_merges() const { return ignore_merges_; }

  static std::vector<std::string> known_names();

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
  bool ignore_merges_ = false;
};

}  // namespace epq::text
