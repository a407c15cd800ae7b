#pragma once
// Reads a model's resident tensors (everything but routed experts) into one anonymous
// buffer with direct I/O, so they count as the process's own memory and never sit in the
// page cache. Each tensor gets a 4 KiB-aligned region that starts at the same offset
// within a page as the tensor does in its shard's file, so it is read straight into place.
// The layers' matrices that quant::use_rows4_layout names are then rearranged in place
// into the four-row layout (quant/rows4_layout.h): the same bytes,
// streamed by one-column products as one stream instead of four or eight.
#include <cstdint>

#include "gguf/file.h"
#include "models/resident_weights.h"
#include "pager/shard_files.h"
#include "util/buffer.h"

namespace epq::runtime {

// Bytes the buffer needs for the file's resident tensors: every tensor but routed experts
// and the tensors of blocks n_layer and above (MTP/NextN blocks the forward pass skips).
uint64_t resident_bytes(const gguf::File& file, int n_layer);

class ResidentLoader {
 public:
  ResidentLoader(const gguf::File& file, const pager::ShardFiles& source, int n_layer);
  const models::ResidentWeights& weights() const { return weights_; }
  uint64_t bytes() const { return buffer_.size(); }

 private:
  Buffer buffer_;
  models::ResidentWeights weights_;
};

}  // namespace epq::runtime
