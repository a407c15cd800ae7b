#pragma once
// Reads a model's weights into one anonymous buffer (in 2 MiB pages where the kernel has
// them) with direct I/O, so they count as the process's own memory and never sit in the
// page cache: with a RAM budget everything but the routed experts, which are paged; all
// in RAM the experts too. Each tensor gets a 4 KiB-aligned region that starts at the same
// offset within a page as the tensor does in its shard's file, so it is read straight into
// place. The layers' matrices that quant::use_rows4_layout names (the experts' one by one)
// are then rearranged in place into the four-row layout (quant/rows4_layout.h): the same
// bytes, streamed by one-column products as one stream instead of four or eight.
#include <cstdint>

#include "gguf/file.h"
#include "models/resident_weights.h"
#include "pager/shard_files.h"
#include "util/buffer.h"

namespace epq::runtime {

// Bytes the buffer needs for the file's tensors, routed experts only `with_experts`, and
// never those of blocks n_layer and above (MTP/NextN blocks the forward pass skips).
uint64_t resident_bytes(const gguf::File& file, int n_layer, bool with_experts = false);

class ResidentLoader {
 public:
  // `progress`: a progress line on stderr once reading takes more than a second.
  ResidentLoader(const gguf::File& file, const pager::ShardFiles& source, int n_layer, bool with_experts, bool progress);
  const models::ResidentWeights& weights() const { return weights_; }
  uint64_t bytes() const { return buffer_.size(); }
  uint64_t rows4_bytes() const { return rows4_bytes_; }  // of them, rearranged into the four-row layout
  double seconds() const { return seconds_; }             // reading and rearranging took

 private:
  Buffer buffer_;
  models::ResidentWeights weights_;
  uint64_t rows4_bytes_ = 0;
  double seconds_ = 0;
};

}  // namespace epq::runtime
