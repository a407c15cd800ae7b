// Tokenizer: pre-tokenizer splits derived by hand from the regexes, BPE merges on a
// hand-built vocabulary, special tokens, and exact round trips on tricky text.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "synth/vocab.h"
#include "text/byte_unicode.h"
#include "text/pretokenizer.h"
#include "text/tokenizer.h"
#include "temp_path.h"
#include "util/error.h"

namespace epq::text {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const std::string& pre, const std::string& s) {
  PreTokenizer p(pre);
  Pieces out;
  for (std::string_view v : p.split(s)) out.emplace_back(v);
  return out;
}

const std::string kTricky = "Hello world! I'm 123 h\u00e9llo  \n\nend";

TEST(PreTokenizer, Qwen2) {
  EXPECT_EQ(split("qwen2", kTricky),
            (Pieces{"Hello", " world", "!", " I", "'m", " ", "1", "2", "3", " h\u00e9llo", "  \n\n", "end"}));
  EXPECT_EQ(split("qwen2", "I'M WE'RE"), (Pieces{"I", "'M", " WE", "'RE"}));  // contractions in any case
  EXPECT_EQ(split("qwen2", "\U0001F600abc \U0001F600 "), (Pieces{"\U0001F600abc", " \U0001F600", " "}));
  EXPECT_EQ(split("qwen2", "\u4f60\u597d\u4e16\u754c"), (Pieces{"\u4f60\u597d\u4e16\u754c"}));
  EXPECT_EQ(split("qwen2", "a\t\tb   "), (Pieces{"a", "\t", "\tb", "   "}));
}

// qwen35 (Qwen3.5 / Qwen3.6) is qwen2's pattern with combining marks (\p{M}) counted as letters in
// word runs and left out of punctuation runs. On mark-free text the two agree.
TEST(PreTokenizer, Qwen35KeepsCombiningMarksWithTheirLetters) {
  EXPECT_EQ(split("qwen35", kTricky), split("qwen2", kTricky));
  EXPECT_EQ(split("qwen35", "I'M WE'RE"), (Pieces{"I", "'M", " WE", "'RE"}));
  // "cafe" + COMBINING ACUTE ACCENT (decomposed "café"): qwen2 cuts the accent off as punctuation.
  EXPECT_EQ(split("qwen2", "cafe\u0301 ok"), (Pieces{"cafe", "\u0301", " ok"}));
  EXPECT_EQ(split("qwen35", "cafe\u0301 ok"), (Pieces{"cafe\u0301", " ok"}));
  // Devanagari "namaste": the virama and vowel sign are marks (Mn) between and after letters.
  const std::string namaste = "\u0928\u092e\u0938\u094d\u0924\u0947";
  EXPECT_EQ(split("qwen2", namaste), (Pieces{"\u0928\u092e\u0938", "\u094d\u0924", "\u0947"}));
  EXPECT_EQ(split("qwen35", namaste), (Pieces{namaste}));
  // A mark right after a space starts a word rather than a punctuation run.
  EXPECT_EQ(split("qwen2", "x \u0301ab"), (Pieces{"x", " \u0301", "ab"}));
  EXPECT_EQ(split("qwen35", "x \u0301ab"), (Pieces{"x", " \u0301ab"}));
  // Punctuation runs stop before a mark, which then stands as a word of its own.
  EXPECT_EQ(split("qwen2", "a!!\u0301"), (Pieces{"a", "!!\u0301"}));
  EXPECT_EQ(split("qwen35", "a!!\u0301"), (Pieces{"a", "!!", "\u0301"}));
  // Digits stay single, as in qwen2.
  EXPECT_EQ(split("qwen35", "x 2026"), (Pieces{"x", " ", "2", "0", "2", "6"}));
}

// laguna splits the text into lines and newline runs first, then runs qwen2's pattern on each,
// so trailing spaces and punctuation never merge with the newline after them.
TEST(PreTokenizer, LagunaSplitsLinesBeforeTheQwen2Pattern) {
  const std::string s = "Hi!\nthere  \n\nx y";
  EXPECT_EQ(split("qwen2", s), (Pieces{"Hi", "!\n", "there", "  \n\n", "x", " y"}));
  EXPECT_EQ(split("laguna", s), (Pieces{"Hi", "!", "\n", "there", "  ", "\n\n", "x", " y"}));
  EXPECT_EQ(split("laguna", "one line, 12"), split("qwen2", "one line, 12"));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
  EXPECT_EQ(split("llama-bpe", "x 12345 y"), (Pieces{"x", " ", "123", "45", " y"}));
  EXPECT_EQ(split("llama3", kTricky),
            (Pieces{"Hello", " world", "!", " I", "'m", " ", "123", " h\u00e9llo", "  \n\n", "end"}));
}

TEST(PreTokenizer, Gpt2KeepsUnmatchedTextAsPieces) {
  EXPECT_EQ(split("gpt-2", kTricky),
            (Pieces{"Hello", " world", "!", " I", "'m", " 123", " h\u00e9llo", "  \n", "\n", "end"}));
  EXPECT_EQ(split("gpt-2", "I'M"), (Pieces{"I", "'", "M"}));  // contractions are lower case only
}

TEST(PreTokenizer, DeepseekV3AppliesThreeRegexesInTurn) {
  EXPECT_EQ(split("deepseek-v3", "abc1234def"), (Pieces{"abc", "123", "4", "def"}));
  // CJK runs are split out before the letter rule can join them to Latin text.
  EXPECT_EQ(split("deepseek-v3", "ab\u4f60\u597dcd"), (Pieces{"ab", "\u4f60\u597d", "cd"}));
  EXPECT_EQ(split("deepseek-v3", "!abc x"), (Pieces{"!abc", " x"}));
}

TEST(PreTokenizer, UnknownPresetIsRejectedWithTheKnownList) {
  try {
    PreTokenizer p("no-such-pre");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'no-such-pre' is not supported (supported: qwen2"), std::string::npos);
  }
}

TEST(PreTokenizer, InvalidUtf8IsKeptNotDropped) {
  const std::string s = "ab\xff\xfe cd";
  std::string joined;
  for (const std::string& p : split("qwen2", s)) joined += p;
  EXPECT_EQ(joined, s);
}

// A GGUF holding only a tokenizer, written to a temporary file.
class TokenizerFile {
 public:
  TokenizerFile(std::vector<std::string> tokens, std::vector<int64_t> types, std::vector<std::string> merges, const std::string& pre,
                int64_t eos, std::optional<int64_t> bos = std::nullopt) {
    path_ = epq::testing::temp_path("tok-" + pre + std::to_string(tokens.size()) + ".gguf");
    gguf::Writer w(path_);
    w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
    w.set("tokenizer.ggml.pre", gguf::Value::string(pre));
    w.set("tokenizer.ggml.tokens", gguf::Value::string_array(std::move(tokens)));
    w.set("tokenizer.ggml.token_type", gguf::Value::int_array(gguf::ValueType::INT32, std::move(types)));
    w.set("tokenizer.ggml.merges", gguf::Value::string_array(std::move(merges)));
    w.set("tokenizer.ggml.eos_token_id", gguf::Value::integer(gguf::ValueType::UINT32, eos));
    if (bos) {
      w.set("tokenizer.ggml.bos_token_id", gguf::Value::integer(gguf::ValueType::UINT32, *bos));
      w.set("tokenizer.ggml.add_bos_token", gguf::Value::integer(gguf::ValueType::BOOL, 1));
    }
    w.begin_data();
    w.finish();
  }
  ~TokenizerFile() { std::filesystem::remove(path_); }
  Tokenizer load() const { return Tokenizer::from_gguf(gguf::File::open(path_)); }

 private:
  std::string path_;
};

Tokenizer hand_built() {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_to_unicode(static_cast<uint8_t>(b))), types.push_back(1);
  const std::vector<std::string> merges = {"h e", "l l", "he ll", "hell o", "\u0120 w", "o r", "\u0120w or", "l d"};
  for (const std::string& m : merges) tokens.push_back(m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1)), types.push_back(1);
  tokens.push_back("<|im_start|>"), types.push_back(3);  // 264: control
  tokens.push_back("<think>"), types.push_back(4);       // 265: user-defined
  tokens.push_back("<|im_end|>"), types.push_back(3);    // 266: control, end of turn
  static TokenizerFile file(tokens, types, merges, "qwen2", 266);
  return file.load();
}

TEST(Tokenizer, MergesByRank) {
  Tokenizer t = hand_built();
  // "hello": he (0) -> ll (1) -> hell (2) -> hello (3). " world": Gw (4), or (5), Gwor (6), ld (7).
  EXPECT_EQ(t.encode("hello world", false), (std::vector<int32_t>{259, 262, 263}));
  EXPECT_EQ(t.encode("hell", false), (std::vector<int32_t>{258}));
  EXPECT_EQ(t.encode("lol", false), (std::vector<int32_t>{'l', 'o', 'l'}));
  EXPECT_EQ(t.decode(std::vector<int32_t>{259, 262, 263}, false), "hello world");
}

TEST(Tokenizer, SpecialTokens) {
  Tokenizer t = hand_built();
  EXPECT_EQ(t.encode("<|im_start|>hello<think>", true), (std::vector<int32_t>{264, 259, 265}));
  // Without parsing, control-token text is plain text; user-defined tokens still match.
  std::vector<int32_t> plain = t.encode("<|im_start|>hello<think>", false);
  EXPECT_EQ(plain.back(), 265);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 264), 0);
  EXPECT_EQ(t.decode(plain, false), "<|im_start|>hello<think>");
  EXPECT_EQ(t.token_text(264, false), "");
  EXPECT_EQ(t.token_text(264, true), "<|im_start|>");
  EXPECT_TRUE(t.is_eog(266));
  EXPECT_FALSE(t.is_eog(265));
  EXPECT_THROW(t.token_text(9999, false), Error);
}

TEST(Tokenizer, PromptGetsOneBosWhenTheModelWantsIt) {
  synth::Vocab v = synth::make_vocab(300);
  std::vector<int64_t> types(v.types.begin(), v.types.end());
  const int32_t bos = v.im_start_id;  // any control token serves as BOS here
  TokenizerFile with_bos(v.tokens, types, v.merges, "qwen2", v.im_end_id, bos);
  Tokenizer t = with_bos.load();
  const std::vector<int32_t> body = t.encode("hi there", true);
  std::vector<int32_t> expected = {bos};
  expected.insert(expected.end(), body.begin(), body.end());
  EXPECT_EQ(t.encode_prompt("hi there", true), expected);
  // A template that already wrote the BOS text does not get a second one.
  EXPECT_EQ(t.encode_prompt("<|im_start|>hi there", true), t.encode("<|im_start|>hi there", true));
  EXPECT_EQ(std::count(expected.begin(), expected.end(), bos), 1);
  // Without add_bos the prompt is the plain encoding.
  EXPECT_EQ(hand_built().encode_prompt("hello world", false), hand_built().encode("hello world", false));
}

TEST(Tokenizer, RoundTripsTrickyTextExactly) {
  synth::Vocab v = synth::make_vocab(400);
  std::vector<int64_t> types(v.types.begin(), v.types.end());
  TokenizerFile file(v.tokens, types, v.merges, "qwen2", v.im_end_id);
  Tokenizer t = file.load();
  const std::vector<std::string> texts = {
      "The river ran past the old mill, and the children counted the rings.",
      "na\u00efve caf\u00e9 \u00fcber \u0434\u043e\u043c \u03b1\u03b2\u03b3",  // multi-byte UTF-8
      "emoji \U0001F600\U0001F44D\U0001F3FD family \U0001F468\u200D\U0001F469\u200D\U0001F467",
      "\u4f60\u597d\uff0c\u4e16\u754c\u3002\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",  // CJK
      "3.14159 1,000,000 -42 0x1F 2024-11-30",
      "I'm, you're, they've, we'll, he'd, it's, DON'T",
      "tabs\t\tand   spaces\n\n\nnewlines \r\n end   ",
      "invalid \xff\xfe bytes \xc3 alone",
      "",
  };
  for (const std::string& s : texts) {
    std::vector<int32_t> ids = t.encode(s, false);
    EXPECT_EQ(t.decode(ids, false), s);
    for (int32_t id : ids) EXPECT_FALSE(t.is_control(id));
  }
  // Merges shorten common English: fewer tokens than bytes.
  EXPECT_LT(t.encode(texts[0], false).size(), texts[0].size() / 2);
  EXPECT_EQ(t.encode("<|im_start|>user\nhi<|im_end|>", true).front(), v.im_start_id);
  EXPECT_TRUE(t.is_eog(v.im_end_id));
  EXPECT_TRUE(t.is_eog(v.endoftext_id));
}

}  // namespace
}  // namespace epq::text
