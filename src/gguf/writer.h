#pragma once
// Streaming GGUF v3 writer. Declare metadata and tensors, call begin_data(), then append
// each tensor's bytes in declaration order, in chunks of any size; padding between
// tensors is inserted automatically. Output goes to "<path>.partial" and is renamed to
// <path> by finish(), so an interrupted write never leaves a truncated model behind.
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/value.h"

namespace epq::gguf {

class Writer {
 public:
  explicit Writer(std::string path, uint64_t alignment = kDefaultAlignment);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void set(std::string key, Value value);
  void add_tensor(std::string name, quant::Type type, std::vector<int64_t> dims);

  void begin_data();
  void write_data(std::span<const uint8_t> bytes);
  void finish();

 private:
  struct Pending {
    std::string name;
    quant::Type type;
    std::vector<int64_t> dims;
    uint64_t offset;
    uint64_t bytes;
  };
  void write_raw(const void* data, size_t n);
  void pad_to(uint64_t multiple);

  std::string path_;
  std::string temp_path_;
  uint64_t alignment_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<Pending> tensors_;
  uint64_t next_offset_ = 0;
  std::FILE* out_ = nullptr;
  uint64_t written_ = 0;          // bytes written to the file so far
  size_t current_ = 0;            // tensor being written
  uint64_t current_written_ = 0;  // bytes of it written so far
  std::vector<char> buffer_;
};

}  // namespace epq::gguf
