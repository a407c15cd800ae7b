#include "runtime/route_replay.h"

#include <fmt/core.h>

#include <filesystem>

#include "pager/size_classes.h"
#include "runtime/routing_trace.h"
#include "util/error.h"

namespace epq::runtime {

RouteReplayer::RouteReplayer(const std::string& path, const models::ModelInfo& info) {
  const RoutingTrace trace = read_routing_trace(path);
  const TraceHeader& h = trace.header;
  std::vector<int> trace_layers;  // the trace's routed layers, ascending
  for (int l = 0; l < h.n_layer; ++l) {
    if (h.layers[static_cast<size_t>(l)].n_expert > 0) trace_layers.push_back(l);
  }
  std::vector<int> position(static_cast<size_t>(h.n_layer), -1);
  for (size_t j = 0; j < trace_layers.size(); ++j) position[static_cast<size_t>(trace_layers[j])] = static_cast<int>(j);
  for (const TracePass& p : trace.passes) n_tokens_ += p.n_tokens;
  if (n_tokens_ == 0 || trace_layers.empty()) fail("{}: --route-trace: the trace has no routed tokens", path);

  k_trace_ = h.k;
  const int k = info.n_expert_used, n_expert = info.n_expert;
  ratio_ = n_expert / h.n_expert;
  copies_ = (k + h.k - 1) / h.k;
  if (ratio_ < copies_) {
    fail("{}: --route-trace: a trace of {} experts top-{} cannot drive {} experts top-{} (each traced expert stands for {} of this model's, "
         "but there are only {} per traced expert)", path, h.n_expert, h.k, n_expert, k, copies_, ratio_);
  }
  // The stream, trace layer by trace layer: every token of every pass.
  const size_t M = trace_layers.size(), K = static_cast<size_t>(h.k), N = static_cast<size_t>(n_tokens_);
  experts_.resize(M * N * K);
  weights_.resize(M * N * K);
  std::vector<size_t> filled(M, 0);
  for (const TracePass& p : trace.passes) {
    for (const TraceLayer& l : p.layers) {
      const size_t j = static_cast<size_t>(position[static_cast<size_t>(l.layer)]);
      std::copy(l.experts.begin(), l.experts.end(), experts_.begin() + static_cast<std::ptrdiff_t>(j * N * K + filled[j]));
      std::copy(l.weights.begin(), l.weights.end(), weights_.begin() + static_cast<std::ptrdiff_t>(j * N * K + filled[j]));
      filled[j] += l.experts.size();
    }
  }
  for (size_t j = 0; j < M; ++j) {
    if (filled[j] != N * K) fail("{}: --route-trace: routed layer {} of the trace does not route every token", path, trace_layers[j]);
  }

  const pager::SizeClasses classes = pager::size_classes(info.experts);
  int routed = 0;
  for (int l = 0; l < info.n_layer; ++l) routed += classes.class_of_layer[static_cast<size_t>(l)] >= 0;
  const int shares = (routed + static_cast<int>(M) - 1) / static_cast<int>(M);
  trace_layer_.assign(static_cast<size_t>(info.n_layer), -1);
  offset_.assign(static_cast<size_t>(info.n_layer), 0);
  for (int l = 0, i = 0; l < info.n_layer; ++l) {
    if (classes.class_of_layer[static_cast<size_t>(l)] < 0) continue;
    trace_layer_[static_cast<size_t>(l)] = i % static_cast<int>(M);
    offset_[static_cast<size_t>(l)] = static_cast<int64_t>(i / static_cast<int>(M)) * n_tokens_ / shares;
    ++i;
  }
  description_ = fmt::format("routing replayed from {} ({} tokens of {}, {} routed layers of {} experts top-{}), mapped onto {} routed layers "
                             "of {} experts top-{}: the outputs are not the model's",
                             std::filesystem::path(path).filename().string(), n_tokens_, h.model, M, h.n_expert, h.k, routed, n_expert, k);
}

void RouteReplayer::start_pass(models::ExpertSource& source, int64_t n_tokens) {
  source_ = &source;
  token0_ = next_token0_;
  next_token0_ += n_tokens;
  layer_ = -1;
}

void RouteReplayer::routed(int layer, std::span<int> experts, std::span<float> weights) {
  if (layer != layer_) layer_ = layer, index_ = 0;
  const int j = trace_layer_[static_cast<size_t>(layer)];
  const int64_t t = (token0_ + index_++ + offset_[static_cast<size_t>(layer)]) % n_tokens_;
  const size_t at = (static_cast<size_t>(j) * static_cast<size_t>(n_tokens_) + static_cast<size_t>(t)) * static_cast<size_t>(k_trace_);
  for (size_t out = 0; out < experts.size(); ++out) {
    const size_t choice = out / static_cast<size_t>(copies_), copy = out % static_cast<size_t>(copies_);
    experts[out] = experts_[at + choice] * ratio_ + static_cast<int>(copy);
    weights[out] = weights_[at + choice] / static_cast<float>(copies_);
  }
  source_->routed(layer, experts, weights);
}

}  // namespace epq::runtime
