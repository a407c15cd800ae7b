// Fuzz target: the byte-level BPE tokenizer must give back exactly the bytes it was given,
// decode(encode(bytes)) == bytes, for any bytes and every pre-tokenizer. The vocabulary is
// a synthesized model's (all 256 byte tokens, so every byte can be encoded); the input's
// first byte picks the pre-tokenizer, the rest is the text. Each text is encoded twice:
// with control tokens parsed (they decode back when rendered) and without.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "synth_tokenizer_file.h"
#include "text/pretokenizer.h"
#include "text/tokenizer.h"

namespace {

using epq::text::Tokenizer;

// One tokenizer per known tokenizer.ggml.pre value.
const std::vector<Tokenizer>& tokenizers() {
  static const std::vector<Tokenizer> all = [] {
    std::vector<Tokenizer> t;
    for (const std::string& pre : epq::text::PreTokenizer::known_names()) {
      t.push_back(Tokenizer::from_gguf(epq::fuzz::synth_tokenizer_file(pre)));
    }
    return t;
  }();
  return all;
}

void expect_round_trip(const Tokenizer& tokenizer, std::string_view text, bool special) {
  const std::vector<int32_t> ids = tokenizer.encode(text, special);
  const std::string back = tokenizer.decode(ids, special);
  if (back != text) {
    std::fprintf(stderr, "tokenizer round trip failed (pre '%s', parse_special %d): %zu bytes in, %zu out\n",
                 tokenizer.pre_name().c_str(), special, text.size(), back.size());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Tokenizer& tokenizer = tokenizers()[data[0] % tokenizers().size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  expect_round_trip(tokenizer, text, false);
  expect_round_trip(tokenizer, text, true);
  return 0;
}
