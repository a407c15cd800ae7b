#include "models/routed_moe.h"

#include <algorithm>
#include <chrono>

#include "core/matmul.h"
#include "core/ops.h"
#include "util/error.h"

namespace epq::models {
namespace {

// One token's choice of an expert: slot j of token t goes to expert e with weight w.
struct Assignment {
  int token, slot, expert;
  float weight;
};

// The largest activation row of n elements over every format.
size_t max_activation_bytes(int64_t n) {
  size_t bytes = 0;
  for (int k = 0; k < quant::kActFormatCount; ++k) bytes = std::max(bytes, quant::activation_bytes(static_cast<quant::ActFormat>(k), n));
  return bytes;
}

}  // namespace

RouterConfig read_router_config(const HparamReader& r, RouterConfig c) {
  const std::string& path = r.file().path();
  if (r.has("expert_gating_func")) {
    const int func = r.count_or_zero("expert_gating_func");
    if (func == 1) c.gating = RouterConfig::Gating::kSoftmax;
    else if (func == 2 || func == 0) c.gating = RouterConfig::Gating::kSigmoid;  // llama.cpp reads 0 (none) as sigmoid
    else fail("{}: expert_gating_func {} is not supported (1 softmax, 2 sigmoid)", path, func);
  }
  c.normalize = r.file().get_bool_or(r.key("expert_weights_norm"), c.normalize);
  const float scale = r.real_or("expert_weights_scale", 0.0, 0, 1e3);
  if (scale != 0) c.scale = scale;
  c.n_group = r.count_or("expert_group_count", c.n_group);
  c.n_group_used = r.count_or("expert_group_used_count", c.n_group_used);
  if (c.n_group_used > c.n_group) fail("{}: expert_group_used_count {} exceeds expert_group_count {}", path, c.n_group_used, c.n_group);
  return c;
}

MoeWeights bind_moe(const WeightBinder& w, int layer, const MoeShape& s, bool has_bias) {
  MoeWeights m;
  m.router = w.matrix(layer_tensor(layer, "ffn_gate_inp"), s.n_embd, s.n_expert);
  if (has_bias) m.bias = w.vector("blk." + std::to_string(layer) + ".exp_probs_b.bias", s.n_expert);
  const std::string next = layer_tensor(layer + 1, "ffn_gate_inp"), next_bias = "blk." + std::to_string(layer + 1) + ".exp_probs_b.bias";
  if (w.loaded(next)) {
    m.next_router = w.matrix(next, s.n_embd, s.n_expert);
    if (has_bias && w.loaded(next_bias)) m.next_bias = w.vector(next_bias, s.n_expert);
  }
  return m;
}

RoutedMoe::RoutedMoe(StateAllocator& alloc, const MoeShape& shape, int max_tokens)
    : s_(shape), routers_(1, Router(shape.router, shape.n_expert, shape.n_expert_used)) {
  const size_t f = sizeof(float), T = static_cast<size_t>(max_tokens);
  const size_t assign = T * static_cast<size_t>(s_.n_expert_used);
  logits_ = alloc.take(T * static_cast<size_t>(s_.n_expert) * f);
  next_logits_ = alloc.take(T * static_cast<size_t>(s_.n_expert) * f);
  gate_out_ = alloc.take(assign * static_cast<size_t>(s_.n_ff) * f);
  up_out_ = alloc.take(assign * static_cast<size_t>(s_.n_ff) * f);
  down_out_ = alloc.take(assign * static_cast<size_t>(s_.n_embd) * f);
  gathered_gate_ = alloc.take(assign * max_activation_bytes(s_.n_embd));
  gathered_up_ = alloc.take(assign * max_activation_bytes(s_.n_embd));
  hidden_act_ = alloc.take(assign * max_activation_bytes(s_.n_ff));
}

void RoutedMoe::forward(ThreadPool& pool, const MoeWeights& w, const ExpertLayout& layout, int layer, ExpertSource& experts,
                        Activations& act, int64_t T, ForwardTiming* timing) {
  const int64_t E = s_.n_embd, F = s_.n_ff, K = s_.n_expert_used, NE = s_.n_expert;
  const bool stale_gate = experts.wants_prediction() && w.next_router.data != nullptr;
  const MatmulJob router_jobs[] = {matmul_job(w.router, act.input, logits_.as<float>(), static_cast<size_t>(NE)),
                                   stale_gate ? matmul_job(w.next_router, act.input, next_logits_.as<float>(), static_cast<size_t>(NE)) : MatmulJob{}};
  run_shared_matmuls(pool, std::span(router_jobs, stale_gate ? 2 : 1));

  // Every token's route, on the pool in chunks of 32 tokens, each thread on its own router;
  // one token at a time they held up a prompt's other thread (docs/PERFORMANCE.md, stop 58).
  // Then the source hears them in token order.
  if (routers_.size() < static_cast<size_t>(pool.size())) routers_.resize(static_cast<size_t>(pool.size()), routers_[0]);
  std::vector<int> chosen(static_cast<size_t>(T * K));
  std::vector<float> chosen_weights(chosen.size());
  pool.run_chunks(T, 32, [&](int64_t first, int64_t end, int thread) {
    Route r;
    for (int64_t t = first; t < end; ++t) {
      routers_[static_cast<size_t>(thread)].route(logits_.as<float>() + t * NE, w.bias, r);
      std::copy(r.experts.begin(), r.experts.end(), chosen.begin() + t * K);
      std::copy(r.weights.begin(), r.weights.end(), chosen_weights.begin() + t * K);
    }
  });
  std::vector<Assignment> assignments;
  for (int64_t t = 0; t < T; ++t) {
    const std::span<int> token_experts(chosen.data() + t * K, static_cast<size_t>(K));
    const std::span<float> token_weights(chosen_weights.data() + t * K, static_cast<size_t>(K));
    experts.routed(layer, token_experts, token_weights);
    for (int64_t j = 0; j < K; ++j) {
      assignments.push_back({static_cast<int>(t), static_cast<int>(j), token_experts[static_cast<size_t>(j)], token_weights[static_cast<size_t>(j)]});
    }
  }
  // Group by expert (ascending id, then token): expert u's rows are [begin[u], begin[u+1]).
  std::stable_sort(assignments.begin(), assignments.end(), [](const Assignment& a, const Assignment& b) { return a.expert < b.expert; });
  std::vector<int> unique, begin;
  for (size_t a = 0; a < assignments.size(); ++a) {
    if (a == 0 || assignments[a].expert != assignments[a - 1].expert) {
      unique.push_back(assignments[a].expert);
      begin.push_back(static_cast<int>(a));
    }
  }
  begin.push_back(static_cast<int>(assignments.size()));
  if (stale_gate) {
    std::vector<int> predicted;
    Route route;
    for (int64_t t = 0; t < T; ++t) {
      routers_[0].route(next_logits_.as<float>() + t * NE, w.next_bias, route);
      for (int e : route.experts) {
        if (std::find(predicted.begin(), predicted.end(), e) == predicted.end()) predicted.push_back(e);
      }
    }
    experts.predicted(layer + 1, predicted);
  }

  const quant::ActFormat fmt[2] = {quant::activation_format(layout.gate.type), quant::activation_format(layout.up.type)};
  const quant::ActFormat down_fmt = quant::activation_format(layout.down.type);
  const size_t in_stride[2] = {act.input.stride(fmt[0]), act.input.stride(fmt[1])};
  const size_t hid_stride = quant::activation_bytes(down_fmt, F);
  // Each assignment's input row, gathered so an expert's tokens are contiguous; once when
  // gate and up read the same activation format (the usual case), else once for each.
  const bool shared_input = fmt[1] == fmt[0];
  uint8_t* gathered[2] = {gathered_gate_.data(), shared_input ? gathered_gate_.data() : gathered_up_.data()};
  // In chunks of 64 rows on every thread: a 691-token prompt gathers ~5,500 rows (12 MB) a layer.
  for (int g = 0; g < (shared_input ? 1 : 2); ++g) {
    const uint8_t* src = act.input.data(fmt[g]);
    pool.run_chunks(static_cast<int64_t>(assignments.size()), 64, [&](int64_t first, int64_t end, int) {
      for (int64_t a = first; a < end; ++a) {
        const auto& row = assignments[static_cast<size_t>(a)];
        std::copy_n(src + static_cast<size_t>(row.token) * in_stride[g], in_stride[g], gathered[g] + static_cast<size_t>(a) * in_stride[g]);
      }
    });
  }

  float* gate_out = gate_out_.as<float>();
  float* up_out = up_out_.as<float>();
  float* down_out = down_out_.as<float>();
  experts.begin(layer, unique);
  std::vector<ReadyExpert> ready;
  std::vector<MatmulJob> jobs;
  std::vector<int> rows;
  for (;;) {
    const auto wait_start = std::chrono::steady_clock::now();
    const bool more = experts.next(ready);
    if (timing) timing->expert_wait_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wait_start).count();
    if (!more) break;
    jobs.clear();
    for (const ReadyExpert& r : ready) {
      const size_t a0 = static_cast<size_t>(begin[static_cast<size_t>(r.index)]);
      const int64_t n = begin[static_cast<size_t>(r.index) + 1] - static_cast<int64_t>(a0);
      jobs.push_back({&r.gate, gathered[0] + a0 * in_stride[0], in_stride[0], n, gate_out + a0 * F, static_cast<size_t>(F)});
      jobs.push_back({&r.up, gathered[1] + a0 * in_stride[1], in_stride[1], n, up_out + a0 * F, static_cast<size_t>(F)});
    }
    run_shared_matmuls(pool, jobs);
    // The down projections' inputs, every ready assignment's in one parallel loop.
    jobs.clear();
    rows.clear();
    for (const ReadyExpert& r : ready) {
      const int a0 = begin[static_cast<size_t>(r.index)], a1 = begin[static_cast<size_t>(r.index) + 1];
      for (int a = a0; a < a1; ++a) rows.push_back(a);
      jobs.push_back({&r.down, hidden_act_.data() + static_cast<size_t>(a0) * hid_stride, hid_stride, a1 - a0,
                      down_out + static_cast<size_t>(a0) * E, static_cast<size_t>(E)});
    }
    pool.run(static_cast<int64_t>(rows.size()), [&](int64_t i, int) {
      const size_t a = static_cast<size_t>(rows[static_cast<size_t>(i)]);
      float* g = gate_out + a * F;
      ops::swiglu(g, up_out + a * F, F, g);
      quant::quantize_activation(down_fmt, g, hidden_act_.data() + a * hid_stride, F);
    });
    run_shared_matmuls(pool, jobs);
  }

  // Sum the weighted expert outputs of each token in top-k order (never arrival order).
  std::vector<int> row_of(static_cast<size_t>(T * K));
  for (size_t a = 0; a < assignments.size(); ++a) row_of[static_cast<size_t>(assignments[a].token * K + assignments[a].slot)] = static_cast<int>(a);
  pool.run(T, [&](int64_t t, int) {
    float* out = act.out.as<float>() + t * E;
    std::fill_n(out, E, 0.0f);
    for (int64_t j = 0; j < K; ++j) {
      const size_t a = static_cast<size_t>(row_of[static_cast<size_t>(t * K + j)]);
      ops::add_scaled(out, down_out + a * E, assignments[a].weight, E);
    }
  });
}

}  // namespace epq::models
