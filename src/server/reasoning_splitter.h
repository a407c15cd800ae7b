#pragma once
// Splits a thinking model's streamed output into reasoning and answer: text between
// <think> and </think> is reasoning_content, the rest is content. Tags may arrive split
// across pieces; text that could be the start of a tag is held back until it is not.
#include <string>
#include <string_view>

namespace epq::server {

class ReasoningSplitter {
 public:
  // in_reasoning: the prompt already opened a <think> block (the template's generation
  // prompt ends inside one), so output starts as reasoning.
  explicit ReasoningSplitter(bool in_reasoning = false) : reasoning_(in_reasoning) {}

  struct Delta {
    std::string reasoning;
    std::string content;
  };
  Delta push(std::string_view text);
  Delta finish();  // releases held-back text

 private:
  bool reasoning_;
  bool seen_content_ = false;
  std::string pending_;
};

// True if the rendered prompt ends inside an unclosed <think> block.
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace epq::server
