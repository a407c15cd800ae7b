#include "synth/tokenizer_metadata.h"

#include <utility>
#include <vector>

#include "synth/vocab.h"

namespace epq::synth {

int vocab_size(const Options& o) { return static_cast<int>(make_vocab(o.n_merges, o.n_vocab).tokens.size()); }

void set_tokenizer_metadata(gguf::Writer& w, const Options& o, const std::string& pre) {
  using gguf::Value;
  using gguf::ValueType;
  auto u32 = [](int64_t v) { return Value::integer(ValueType::UINT32, v); };
  Vocab v = make_vocab(o.n_merges, o.n_vocab);
  std::vector<int64_t> types(v.types.begin(), v.types.end());
  w.set("tokenizer.ggml.model", Value::string("gpt2"));
  w.set("tokenizer.ggml.pre", Value::string(pre));
  w.set("tokenizer.ggml.tokens", Value::string_array(std::move(v.tokens)));
  w.set("tokenizer.ggml.token_type", Value::int_array(ValueType::INT32, std::move(types)));
  w.set("tokenizer.ggml.merges", Value::string_array(std::move(v.merges)));
  w.set("tokenizer.ggml.eos_token_id", u32(v.im_end_id));
  w.set("tokenizer.ggml.padding_token_id", u32(v.endoftext_id));
  w.set("tokenizer.ggml.bos_token_id", u32(v.endoftext_id));
  w.set("tokenizer.ggml.add_bos_token", Value::integer(ValueType::BOOL, 0));
  w.set("tokenizer.chat_template", Value::string(chatml_template()));
}

const char* chatml_template() {
  return "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
         "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
         "{% endif %}";
}

}  // namespace epq::synth
