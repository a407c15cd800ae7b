// Fuzz target: no byte sequence may crash the GGUF parser, nor the tokenizer loader that
// reads its metadata (the chat template has jinja_fuzz). Malformed input must end in
// epq::Error; anything else (a crash, a sanitizer report, another exception) is a bug.
// (A split model's shards are checked against each other in gguf/split.h: a target for
// them goes beside this one, see CMakeLists.txt.)
#include <cstddef>
#include <cstdint>

#include "gguf/file.h"
#include "text/tokenizer.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const epq::gguf::File f = epq::gguf::File::parse({data, size}, "fuzz.gguf");
    // Touch what a loader would: every key and tensor, then the tokenizer.
    for (const auto& kv : f.metadata()) (void)kv.second.to_display();
    for (const auto& t : f.tensors()) (void)t.shape_string();
    (void)epq::text::Tokenizer::from_gguf(f);
  } catch (const epq::Error&) {
  }
  return 0;
}
