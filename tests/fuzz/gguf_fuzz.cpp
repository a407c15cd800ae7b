// Fuzz target: no byte sequence may crash the GGUF parser. Malformed input must end in
// epq::Error; anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>

#include "gguf/file.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    epq::gguf::File f = epq::gguf::File::parse({data, size}, "fuzz.gguf");
    // Touch what a loader would: every key and tensor.
    for (const auto& kv : f.metadata()) (void)kv.second.to_display();
    for (const auto& t : f.tensors()) (void)t.shape_string();
  } catch (const epq::Error&) {
  }
  return 0;
}
