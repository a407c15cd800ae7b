#include "runtime/routing_recorder.h"

namespace epq::runtime {

void RoutingRecorder::start_pass(models::ExpertSource& source, int64_t n_tokens, int32_t pos0) {
  source_ = &source;
  writer_.pass(n_tokens, pos0);
}

void RoutingRecorder::routed(int layer, std::span<int> experts, std::span<float> weights) {
  source_->routed(layer, experts, weights);
  experts_.insert(experts_.end(), experts.begin(), experts.end());
  weights_.insert(weights_.end(), weights.begin(), weights.end());
}

void RoutingRecorder::begin(int layer, std::span<const int> experts) {
  writer_.layer(layer, experts_, weights_);
  experts_.clear();
  weights_.clear();
  source_->begin(layer, experts);
}

}  // namespace epq::runtime
