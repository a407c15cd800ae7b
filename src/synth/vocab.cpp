#include "synth/vocab.h"

#include <map>
#include <set>
#include <utility>

#include "synth/corpus.h"
#include "text/byte_unicode.h"

namespace epq::synth {
namespace {

// Words as GPT-2 sees them: a run of letters with its leading space, or one other byte.
std::map<std::string, int> count_words(std::string_view text) {
  std::map<std::string, int> words;
  size_t i = 0;
  auto is_letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  while (i < text.size()) {
    size_t start = i;
    if (text[i] == ' ' && i + 1 < text.size() && is_letter(text[i + 1])) ++i;
    if (is_letter(text[i])) {
      while (i < text.size() && is_letter(text[i])) ++i;
    } else {
      ++i;
    }
    ++words[std::string(text.substr(start, i - start))];
  }
  return words;
}

}  // namespace

Vocab make_vocab(int n_merges, int n_vocab) {
  Vocab v;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(text::byte_to_unicode(static_cast<uint8_t>(b)));
    v.types.push_back(kNormal);
  }

  // Each word as a sequence of symbols (strings of mapped characters), with its count.
  std::vector<std::pair<std::vector<std::string>, int>> words;
  for (const auto& [word, count] : count_words(training_corpus())) {
    std::vector<std::string> symbols;
    for (char c : word) symbols.push_back(text::byte_to_unicode(static_cast<uint8_t>(c)));
    words.emplace_back(std::move(symbols), count);
  }

  std::set<std::string> known(v.tokens.begin(), v.tokens.end());
  for (int m = 0; m < n_merges; ++m) {
    std::map<std::pair<std::string, std::string>, int> pairs;  // ordered: ties break by text
    for (const auto& [symbols, count] : words) {
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += count;
    }
    const std::pair<std::string, std::string>* best = nullptr;
    int best_count = 0;
    for (const auto& [pair, count] : pairs) {
      if (count > best_count) best = &pair, best_count = count;
    }
    if (best == nullptr) break;
    const std::string left = best->first, right = best->second, joined = left + right;
    v.merges.push_back(left + " " + right);
    if (known.insert(joined).second) {  // two merges may spell the same token
      v.tokens.push_back(joined);
      v.types.push_back(kNormal);
    }
    for (auto& [symbols, count] : words) {
      std::vector<std::string> merged;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          merged.push_back(joined);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      symbols = std::move(merged);
    }
  }

  auto add_special = [&](const char* text, int32_t type) {
    v.tokens.emplace_back(text);
    v.types.push_back(type);
    return static_cast<int32_t>(v.tokens.size() - 1);
  };
  v.endoftext_id = add_special("<|endoftext|>", kControl);
  v.im_start_id = add_special("<|im_start|>", kControl);
  v.im_end_id = add_special("<|im_end|>", kControl);
  add_special("<think>", kUserDefined);
  add_special("</think>", kUserDefined);
  while (static_cast<int>(v.tokens.size()) < n_vocab) {
    v.tokens.push_back("[PAD" + std::to_string(v.tokens.size()) + "]");
    v.types.push_back(kUnused);
  }
  return v;
}

}  // namespace epq::synth
