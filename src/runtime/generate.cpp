#include "runtime/generate.h"

#include <algorithm>
#include <chrono>

namespace epq::runtime {

size_t incomplete_utf8_suffix(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence is longer than what follows.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

namespace {

// Length of the longest suffix of text that is a proper prefix of some stop string.
size_t stop_prefix_suffix(std::string_view text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const std::string& stop : stops) {
    for (size_t n = std::min(text.size(), stop.size() - 1); n > best; --n) {
      if (text.substr(text.size() - n) == std::string_view(stop).substr(0, n)) {
        best = n;
        break;
      }
    }
  }
  return best;
}

}  // namespace

GenerateResult generate(Session& session, const text::Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateOptions& o, const std::function<bool(std::string_view)>& on_text) {
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(prompt.size());
  Sampler sampler(o.sampler);
  const int32_t n_vocab = tokenizer.n_vocab();
  auto start = std::chrono::steady_clock::now();
  session.add_checkpoint(session.position() + static_cast<int32_t>(prompt.size()));  // a rerun of this prompt starts here
  const float* logits = session.eval(prompt);
  r.prompt_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (o.after_prompt) o.after_prompt();
  start = std::chrono::steady_clock::now();

  std::string pending;  // generated text not yet handed to on_text
  size_t emitted = 0;   // bytes of r.text already handed out
  r.finish_reason = "length";
  while (static_cast<int>(r.tokens.size()) < o.max_tokens) {
    const int32_t id = sampler.sample(logits, n_vocab, session.tokens());
    if (!o.ignore_eos && tokenizer.is_eog(id)) {
      r.finish_reason = "stop";
      break;
    }
    r.tokens.push_back(id);
    if (o.logprobs >= 0) r.logprobs.push_back(token_logprob(logits, n_vocab, id, o.logprobs));
    r.text += tokenizer.token_text(id, false);
    bool stopped = false;
    for (const std::string& stop : o.stop) {
      const size_t at = r.text.find(stop, emitted > stop.size() ? emitted - stop.size() : 0);
      if (!stop.empty() && at != std::string::npos) {
        r.text.resize(at);
        stopped = true;
      }
    }
    // Hand out what can no longer change: complete characters not part of a stop prefix.
    const size_t hold = stopped ? 0 : std::max(incomplete_utf8_suffix(r.text), stop_prefix_suffix(r.text, o.stop));
    if (r.text.size() > emitted + hold) {
      const std::string_view piece = std::string_view(r.text).substr(emitted, r.text.size() - hold - emitted);
      emitted += piece.size();
      if (on_text && !on_text(piece)) {
        r.finish_reason = "cancelled";
        break;
      }
    }
    if (stopped) {
      r.finish_reason = "stop";
      break;
    }
    if (static_cast<int>(r.tokens.size()) == o.max_tokens || session.position() >= session.n_ctx()) break;
    logits = session.eval(std::span<const int32_t>(&id, 1));
  }
  if (r.finish_reason != "cancelled" && r.text.size() > emitted && on_text) on_text(std::string_view(r.text).substr(emitted));
  r.generation_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace epq::runtime
