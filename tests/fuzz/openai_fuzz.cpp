// Fuzz target: any request body, as /v1/chat/completions and as /v1/completions. A bad
// body must end in ApiError, whose JSON error object must print (it quotes the client's
// bytes); anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/openai_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (bool chat : {true, false}) {
    try {
      (void)epq::server::parse_completion_request(body, chat, 1024);
    } catch (const epq::server::ApiError& e) {
      (void)e.body();
    }
  }
  return 0;
}
