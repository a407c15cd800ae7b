#include "text/tokenizer.h"

#include <algorithm>
#include <queue>

#include "text/byte_unicode.h"
#include "util/error.h"

namespace epq::text {
namespace {

enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// Control tokens that end a turn in common chat formats.
const char* const kEndOfTurnTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                       "<|eom_id|>", "<EOT>", "<|return|>", "<|call|>", "<|end\u2581of\u2581sentence|>"};

}  // namespace

Tokenizer Tokenizer::from_gguf(const gguf::File& f) {
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2") fail("{}: tokenizer model '{}' is not supported (supported: gpt2 byte-level BPE)", f.path(), model);
  Tokenizer t;
  t.tokens_ = f.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING).strings();
  const int32_t n = static_cast<int32_t>(t.tokens_.size());
  if (n == 0) fail("{}: tokenizer.ggml.tokens is empty", f.path());
  t.types_.assign(static_cast<size_t>(n), kNormal);
  if (f.find("tokenizer.ggml.token_type")) {
    const auto& types = f.get_array("tokenizer.ggml.token_type", gguf::ValueType::INT32).ints();
    if (static_cast<int32_t>(types.size()) != n) fail("{}: token_type has {} entries for {} tokens", f.path(), types.size(), n);
    for (int32_t i = 0; i < n; ++i) t.types_[static_cast<size_t>(i)] = static_cast<int32_t>(types[static_cast<size_t>(i)]);
  }
  for (int32_t i = 0; i < n; ++i) {
    const std::string& piece = t.tokens_[static_cast<size_t>(i)];
    t.ids_.emplace(piece, i);
    t.longest_token_bytes_ = std::max(t.longest_token_bytes_, piece.size());  // its text is at most this long
  }
  const auto& merges = f.get_array("tokenizer.ggml.merges", gguf::ValueType::STRING).strings();
  for (size_t r = 0; r < merges.size(); ++r) {
    if (merges[r].find(' ', 1) == std::string::npos) fail("{}: merge {} '{}' has no separating space", f.path(), r, merges[r]);
    t.merge_rank_.emplace(merges[r], static_cast<int32_t>(r));
  }
  auto token_id = [&](const char* key) -> std::optional<int32_t> {
    if (!f.find(key)) return std::nullopt;
    int64_t id = f.get_int(key);
    if (id < 0 || id >= n) fail("{}: {} = {} is not a token id (vocabulary has {})", f.path(), key, id, n);
    return static_cast<int32_t>(id);
  };
  t.bos_ = token_id("tokenizer.ggml.bos_token_id");
  t.eos_ = token_id("tokenizer.ggml.eos_token_id");
  t.pre_name_ = f.get_string_or("tokenizer.ggml.pre", "default");
  t.pre_.emplace(t.pre_name_);
  t.add_bos_ = f.get_bool_or("tokenizer.ggml.add_bos_token", t.pre_->ignore_merges());  // llama3 adds BOS
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (auto id = token_id(key)) t.eog_.push_back(*id);
  }
  for (int32_t i = 0; i < n; ++i) {
    const int32_t type = t.types_[static_cast<size_t>(i)];
    if (type != kControl && type != kUserDefined) continue;
    if (t.tokens_[static_cast<size_t>(i)].empty()) continue;
    t.specials_.push_back(i);
    if (type == kControl) {
      for (const char* text : kEndOfTurnTexts) {
        if (t.tokens_[static_cast<size_t>(i)] == text) t.eog_.push_back(i);
      }
    }
  }
  std::stable_sort(t.specials_.begin(), t.specials_.end(), [&](int32_t a, int32_t b) {
    return t.tokens_[static_cast<size_t>(a)].size() > t.tokens_[static_cast<size_t>(b)].size();
  });
  return t;
}

std::optional<int32_t> Tokenizer::find(std::string_view piece) const {
  auto it = ids_.find(std::string(piece));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_control(int32_t id) const { return id >= 0 && id < n_vocab() && types_[static_cast<size_t>(id)] == kControl; }

bool Tokenizer::is_eog(int32_t id) const { return std::find(eog_.begin(), eog_.end(), id) != eog_.end(); }

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  size_t plain_start = 0, i = 0;
  while (i < text.size()) {
    int32_t match = -1;
    for (int32_t id : specials_) {
      if (!parse_special && types_[static_cast<size_t>(id)] == kControl) continue;
      const std::string& s = tokens_[static_cast<size_t>(id)];
      if (text.compare(i, s.size(), s) == 0) {
        match = id;
        break;  // longest first
      }
    }
    if (match < 0) {
      ++i;
      continue;
    }
    encode_text(text.substr(plain_start, i - plain_start), out);
    out.push_back(match);
    i += tokens_[static_cast<size_t>(match)].size();
    plain_start = i;
  }
  encode_text(text.substr(plain_start), out);
  return out;
}

std::vector<int32_t> Tokenizer::encode_prompt(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  const bool has_bos = bos_ && parse_special && text.starts_with(tokens_[static_cast<size_t>(*bos_)]);
  if (add_bos_ && bos_ && !has_bos) out.push_back(*bos_);
  const std::vector<int32_t> body = encode(text, parse_special);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

void Tokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  for (std::string_view word : pre_->split(text)) encode_word(word, out);
}

void Tokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  std::string mapped;
  for (char c : word) mapped += byte_to_unicode(static_cast<uint8_t>(c));
  if (pre_->ignore_merges()) {
    if (auto id = find(mapped)) {
      out.push_back(*id);
      return;
    }
  }
  // Symbols as a linked list over `mapped`; merge the lowest-ranked adjacent pair first
  // (leftmost among equals) until no pair has a rank.
  struct Symbol {
    int prev, next;
    size_t start, len;
  };
  std::vector<Symbol> sym;
  for (size_t i = 0; i < mapped.size();) {
    size_t start = i;
    next_code_point(mapped, i);
    sym.push_back({static_cast<int>(sym.size()) - 1, static_cast<int>(sym.size()) + 1, start, i - start});
  }
  sym.back().next = -1;
  struct Candidate {
    int32_t rank;
    int left;
    size_t len;  // combined length when queued: stale if the symbols changed since
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int left) {
    if (left < 0 || sym[static_cast<size_t>(left)].next < 0) return;
    const Symbol& a = sym[static_cast<size_t>(left)];
    const Symbol& b = sym[static_cast<size_t>(a.next)];
    std::string key = mapped.substr(a.start, a.len);
    key += ' ';
    key.append(mapped, b.start, b.len);
    auto it = merge_rank_.find(key);
    if (it != merge_rank_.end()) queue.push({it->second, left, a.len + b.len});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& a = sym[static_cast<size_t>(c.left)];
    if (a.len == 0 || a.next < 0 || a.len + sym[static_cast<size_t>(a.next)].len != c.len) continue;  // stale
    Symbol& b = sym[static_cast<size_t>(a.next)];
    a.len += b.len;
    b.len = 0;
    a.next = b.next;
    if (a.next >= 0) sym[static_cast<size_t>(a.next)].prev = c.left;
    consider(a.prev);
    consider(c.left);
  }
  for (int i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    const Symbol& s = sym[static_cast<size_t>(i)];
    if (auto id = find(std::string_view(mapped).substr(s.start, s.len))) {
      out.push_back(*id);
      continue;
    }
    // Not in the vocabulary: fall back to one token per byte.
    for (size_t k = s.start; k < s.start + s.len;) {
      size_t from = k;
      const uint32_t cp = next_code_point(mapped, k);
      const int byte = unicode_to_byte(cp);
      auto id = byte >= 0 ? find(byte_to_unicode(static_cast<uint8_t>(byte))) : std::nullopt;
      if (!id) fail("tokenizer: the vocabulary has no token for '{}'", mapped.substr(from, k - from));
      out.push_back(*id);
    }
  }
}

std::string Tokenizer::token_text(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) fail("token id {} is out of range (vocabulary has {} tokens)", id, n_vocab());
  const std::string& p = tokens_[static_cast<size_t>(id)];
  const int32_t type = types_[static_cast<size_t>(id)];
  if (type == kControl || type == kUnknown || type == kUnused) return render_special ? p : std::string();
  if (type == kUserDefined) return p;
  std::string out;
  for (size_t i = 0; i < p.size();) {
    const size_t from = i;
    const int byte = unicode_to_byte(next_code_point(p, i));
    if (byte >= 0) out += static_cast<char>(byte);
    else out.append(p, from, i - from);
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += token_text(id, render_special);
  return out;
}

}  // namespace epq::text
