#pragma once
// --trace-routing: the engine hands each forward pass's MoE blocks this recorder in place
// of its expert source. It passes requests through unchanged and writes what the routers
// told routed() (after the sources it wraps have had their say) to the trace, one layer record per request (routing_trace.h).
#include <string>
#include <vector>

#include "models/expert_source.h"
#include "runtime/routing_trace.h"

namespace epq::runtime {

class RoutingRecorder : public models::ExpertSource {
 public:
  RoutingRecorder(const std::string& path, const TraceHeader& header) : writer_(path, header) {}
  // The next forward pass, whose experts come from `source`.
  void start_pass(models::ExpertSource& source, int64_t n_tokens, int32_t pos0);

  void routed(int layer, std::span<int> experts, std::span<float> weights) override;
  bool wants_prediction() const override { return source_->wants_prediction(); }
  void predicted(int next_layer, std::span<const int> experts) override { source_->predicted(next_layer, experts); }
  void begin(int layer, std::span<const int> experts) override;
  bool next(std::vector<models::ReadyExpert>& ready) override { return source_->next(ready); }

 private:
  TraceWriter writer_;
  models::ExpertSource* source_ = nullptr;
  std::vector<int> experts_;  // the coming request's choices, token-major
  std::vector<float> weights_;
};

}  // namespace epq::runtime
