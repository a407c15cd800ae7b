#include "text/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include "util/error.h"

namespace epq::text {
namespace {

// Pre-tokenizer patterns by tokenizer.ggml.pre, as llama.cpp's vocabulary loader has them.
const char* const kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5 / Qwen3.6: qwen2's pattern with combining marks (\p{M}) joining letter runs and kept out
// of punctuation runs, so a base letter and its accents stay one piece.
const char* const kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// poolside Laguna: lines and newline runs are split apart first, then qwen2's pattern runs on each.
const char* const kLagunaLines = R"([^\n]+|[\n]+)";
const char* const kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const char* const kDeepseekV3[] = {
    R"(\p{N}{1,3})",
    "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

struct Preset {
  std::vector<const char*> names;
  std::vector<const char*> patterns;
  bool ignore_merges;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> p = {
      {{"qwen2", "deepseek-r1-qwen"}, {kQwen2}, false},
      {{"qwen35"}, {kQwen35}, false},
      {{"laguna"}, {kLagunaLines, kQwen2}, false},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3"}, {kLlama3}, true},
      {{"gpt-2", "gpt2", "phi-2", "jina-es", "jina-de", "default"}, {kGpt2}, false},
      {{"deepseek-v3"}, {kDeepseekV3[0], kDeepseekV3[1], kDeepseekV3[2]}, false},
  };
  return p;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::string& pre) {
  const Preset* preset = nullptr;
  for (const Preset& p : presets()) {
    for (const char* n : p.names) {
      if (pre == n) preset = &p;
    }
  }
  if (preset == nullptr) fail("tokenizer.ggml.pre '{}' is not supported (supported: {})", pre, fmt::join(known_names(), ", "));
  ignore_merges_ = preset->ignore_merges;
  for (const char* pattern : preset->patterns) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto r = std::make_unique<Regex>();
    r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (r->code == nullptr) fail("internal: pre-tokenizer regex does not compile (error {} at {})", error, offset);
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  // optional speed-up; interpretive matching otherwise
    regexes_.push_back(std::move(r));
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string> PreTokenizer::known_names() {
  std::vector<std::string> out;
  for (const Preset& p : presets()) out.insert(out.end(), p.names.begin(), p.names.end());
  return out;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces = {text};
  pcre2_match_data* match = nullptr;
  for (const auto& regex : regexes_) {
    match = pcre2_match_data_create_from_pattern(regex->code, nullptr);
    std::vector<std::string_view> next;
    for (std::string_view piece : pieces) {
      size_t emitted = 0, search = 0;  // end of the last piece emitted; where to match next
      while (search < piece.size()) {
        int rc = pcre2_match(regex->code, reinterpret_cast<PCRE2_SPTR>(piece.data()), piece.size(), search, 0, match, nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
        if (ov[1] == ov[0]) {  // these patterns never match empty; if one did, move on
          search = ov[1] + 1;
          continue;
        }
        if (ov[0] > emitted) next.push_back(piece.substr(emitted, ov[0] - emitted));
        next.push_back(piece.substr(ov[0], ov[1] - ov[0]));
        emitted = search = ov[1];
      }
      if (emitted < piece.size()) next.push_back(piece.substr(emitted));
    }
    pcre2_match_data_free(match);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace epq::text
