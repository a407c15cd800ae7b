#include "runtime/run_report.h"

#include "runtime/engine.h"
#include "runtime/generate.h"
#include "util/process_memory.h"

namespace epq::runtime {

nlohmann::json RunReport::to_json() const {
  return {{"prompt_tokens", prompt_tokens}, {"generated_tokens", generated_tokens}, {"prompt_tps", prompt_tps},
          {"decode_tps", decode_tps}, {"peak_rss", peak_rss}, {"anon_rss", anon_rss}, {"paged", paged},
          {"arena_bytes", arena_bytes}, {"slots", slots}, {"coverage", coverage}, {"requests", requests}, {"hits", hits},
          {"misses", misses}, {"evictions", evictions}, {"bytes_read", bytes_read}, {"io_wait_ms", io_wait_ms},
          {"io_backend", io_backend}, {"policy", policy}, {"n_expert_used", n_expert_used},
          {"decode_requests", decode_requests}, {"decode_hits", decode_hits}, {"decode_bytes_read", decode_bytes_read},
          {"prefetch", prefetch}, {"decode_prefetched", decode_prefetched}, {"decode_prefetch_used", decode_prefetch_used},
          {"decode_predicted", decode_predicted}, {"decode_predicted_right", decode_predicted_right},
          {"route_trace", route_trace}};
}

RunReport RunReport::from_json(const nlohmann::json& j) {
  RunReport r;
  r.prompt_tokens = j.at("prompt_tokens");
  r.generated_tokens = j.at("generated_tokens");
  r.prompt_tps = j.at("prompt_tps");
  r.decode_tps = j.at("decode_tps");
  r.peak_rss = j.at("peak_rss");
  r.anon_rss = j.at("anon_rss");
  r.paged = j.at("paged");
  r.arena_bytes = j.at("arena_bytes");
  r.slots = j.at("slots").get<std::vector<int64_t>>();
  r.coverage = j.at("coverage");
  r.requests = j.at("requests");
  r.hits = j.at("hits");
  r.misses = j.at("misses");
  r.evictions = j.at("evictions");
  r.bytes_read = j.at("bytes_read");
  r.io_wait_ms = j.at("io_wait_ms");
  r.io_backend = j.at("io_backend");
  r.policy = j.at("policy");
  r.n_expert_used = j.at("n_expert_used");
  r.decode_requests = j.at("decode_requests");
  r.decode_hits = j.at("decode_hits");
  r.decode_bytes_read = j.at("decode_bytes_read");
  r.prefetch = j.at("prefetch");
  r.decode_prefetched = j.at("decode_prefetched");
  r.decode_prefetch_used = j.at("decode_prefetch_used");
  r.decode_predicted = j.at("decode_predicted");
  r.decode_predicted_right = j.at("decode_predicted_right");
  r.route_trace = j.at("route_trace");
  return r;
}

RunReport make_run_report(const Engine& engine, const GenerateResult& g, const pager::PagerStats& after_prompt) {
  RunReport r;
  r.prompt_tokens = g.prompt_tokens;
  r.generated_tokens = static_cast<int>(g.tokens.size());
  r.prompt_tps = g.prompt_tokens / std::max(g.prompt_seconds, 1e-9);
  r.decode_tps = g.tokens.size() > 1 ? static_cast<double>(g.tokens.size() - 1) / std::max(g.generation_seconds, 1e-9) : 0.0;
  const ProcessMemory m = read_process_memory();
  r.peak_rss = m.peak_rss;
  r.anon_rss = m.rss_anon;
  r.n_expert_used = engine.info().n_expert_used;
  r.route_trace = engine.route_replay();
  r.prefetch = engine.pager() ? engine.prefetch_name() : "off";
  if (const pager::Pager* p = engine.pager()) {
    r.paged = true;
    r.arena_bytes = p->arena_bytes();
    r.slots = p->slots_per_class();
    r.coverage = engine.plan()->coverage();
    const pager::PagerStats& s = p->stats();
    r.requests = s.requests;
    r.hits = s.hits;
    r.misses = s.misses;
    r.evictions = s.evictions();
    r.bytes_read = s.bytes_read;
    r.io_wait_ms = s.io_wait_ms;
    r.io_backend = p->io_name();
    r.policy = p->policy().name();
    const pager::PagerStats decode = s - after_prompt;
    r.decode_requests = decode.requests;
    r.decode_hits = decode.hits;
    r.decode_bytes_read = decode.bytes_read;
    r.decode_prefetched = decode.prefetched;
    r.decode_prefetch_used = decode.prefetch_used;
    r.decode_predicted = decode.predicted;
    r.decode_predicted_right = decode.predicted_right;
  }
  return r;
}

}  // namespace epq::runtime
