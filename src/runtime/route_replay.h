#pragma once
// `--route-trace TRACE` (for `epq bench` on synthetic models): the routers' choices are
// replaced by a recorded trace's, so that the pager and the disk see trained routing on a
// model whose own routers are random. The outputs are then not the model's; the engine
// and the bench say so. A trace from a smaller model is mapped onto this one:
//
//  - The trace is a stream of N tokens (every token of every pass, in order), each with
//    the choices of the trace's M_t routed layers. The model's i-th routed layer (of M)
//    takes the trace's routed layer i mod M_t, at a token offset of (i div M_t) * N / R
//    with R = ceil(M / M_t), so that model layers sharing a trace layer see different
//    stretches of the trace. The model's t-th token (counted over all passes) reads
//    trace token (t + offset) mod N.
//  - Experts: with r = E / E_t (this model's experts per layer over the trace's) and
//    m = ceil(k / k_t), the trace's choice e becomes experts e*r, e*r+1, ..., e*r+m-1,
//    each with its weight / m; the first k of these, in order, are the token's choice.
//    So each trace expert stands for m of this model's, and the skew of its routing and
//    the reuse between tokens carry over. Needs r >= m.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "models/expert_source.h"
#include "models/model.h"

namespace epq::runtime {

class RouteReplayer : public models::ExpertSource {
 public:
  // Reads the trace and checks that it maps onto this model; one Error if not.
  RouteReplayer(const std::string& trace_path, const models::ModelInfo& info);

  // The next forward pass, of n_tokens tokens, whose experts come from `source`.
  void start_pass(models::ExpertSource& source, int64_t n_tokens);
  void routed(int layer, std::span<int> experts, std::span<float> weights) override;
  // The stale gate sees the model's own routers, not the trace's: refused (the engine
  // checks), so nothing to forward.
  void begin(int layer, std::span<const int> experts) override { source_->begin(layer, experts); }
  bool next(std::vector<models::ReadyExpert>& ready) override { return source_->next(ready); }

  // One line for logs and reports: the trace and its mapping.
  const std::string& description() const { return description_; }

 private:
  int k_trace_ = 0, n_tokens_ = 0, ratio_ = 1, copies_ = 1;
  std::vector<int> trace_layer_;     // per model layer: routed-layer index in the trace, -1 if none
  std::vector<int64_t> offset_;      // per model layer: token offset
  std::vector<uint16_t> experts_;    // [trace layer][token][k_trace]
  std::vector<float> weights_;
  std::string description_;
  models::ExpertSource* source_ = nullptr;
  int64_t token0_ = 0, next_token0_ = 0;  // the current pass's first token in the stream
  int layer_ = -1, index_ = 0;            // routed() calls so far for this layer in this pass
};

}  // namespace epq::runtime
