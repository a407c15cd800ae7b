#include "synth_tokenizer_file.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "gguf/writer.h"
#include "synth/options.h"
#include "synth/tokenizer_metadata.h"

namespace epq::fuzz {

gguf::File synth_tokenizer_file(const std::string& pre) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("epq-fuzz-" + std::to_string(getpid()) + "-" + pre + ".gguf")).string();
  {
    gguf::Writer w(path);
    synth::set_tokenizer_metadata(w, synth::Options{}, pre);
    w.begin_data();
    w.finish();
  }
  gguf::File file = gguf::File::open(path);
  file.unmap();  // the metadata stays; the file can go
  std::remove(path.c_str());
  return file;
}

}  // namespace epq::fuzz
