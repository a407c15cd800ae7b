#pragma once
// Routing traces (--trace-routing FILE): per forward pass, per routed-expert layer, per
// token, the experts the router chose and their weights, behind a header that names the
// model and the pager's slot shape of every layer, so that `epq replay` can rebuild the
// size classes and count bytes without the model file. The byte layout is documented in
// docs/ROUTING_TRACE.md; all integers are little-endian.
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "models/model.h"
#include "pager/size_classes.h"

namespace epq::runtime {

inline constexpr char kTraceMagic[8] = {'E', 'P', 'Q', 'T', 'R', 'A', 'C', 'E'};
inline constexpr uint32_t kTraceVersion = 1;

struct TraceHeader {
  std::string architecture;  // general.architecture
  std::string model;         // the model file's name, without directories
  int n_layer = 0, n_expert = 0, k = 0;  // k: experts per token, after --expert-used
  std::vector<pager::LayerSlotShape> layers;  // per layer; n_expert 0 without routed experts
  std::vector<std::vector<uint32_t>> read_pages;  // per layer, per expert: bytes the pager reads / 4096

  // Built from a loaded model, as the engine records it.
  static TraceHeader of_model(const std::string& model_path, const models::ModelInfo& info);
  uint64_t read_bytes(int layer, int expert) const { return uint64_t{read_pages[static_cast<size_t>(layer)][static_cast<size_t>(expert)]} * 4096; }
  // Empty when this trace could have come from a model with `other`'s header; else why not.
  std::string mismatch(const TraceHeader& other) const;
};

// One routed-expert layer of one forward pass: experts[t * k + j] is token t's j-th choice.
struct TraceLayer {
  int layer = 0;
  int n_tokens = 0;
  std::vector<uint16_t> experts;
  std::vector<float> weights;
  // The layer's request as the MoE block makes it: its distinct experts, ascending.
  std::vector<int> distinct() const;
};

struct TracePass {
  int n_tokens = 0;
  int32_t pos0 = 0;
  std::vector<TraceLayer> layers;
};

struct RoutingTrace {
  TraceHeader header;
  std::vector<TracePass> passes;
};

// Reads and checks a whole trace; a bad file (not a trace, another version, truncated,
// out-of-range ids) is one Error naming the file and what is wrong.
RoutingTrace read_routing_trace(const std::string& path);

class TraceWriter {
 public:
  TraceWriter(const std::string& path, const TraceHeader& header);
  // Writes the end record (which tells a complete trace from a truncated one) and closes.
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void pass(int64_t n_tokens, int32_t pos0);
  // n_tokens x k choices, token-major.
  void layer(int layer, std::span<const int> experts, std::span<const float> weights);

 private:
  void put(const void* data, size_t bytes);
  void check();

  std::string path_;
  int k_;
  std::FILE* out_;
  uint64_t passes_ = 0, layers_ = 0;
  bool failed_ = false;  // a write failed
};

}  // namespace epq::runtime
