#pragma once
// Causal grouped-query attention over an F16 key/value cache. Query token t (at absolute
// position positions[t]) attends to cache rows 0..positions[t]; query head h reads KV head
// h / (n_head / n_head_kv). Work is split by (token, KV head); the query heads sharing a
// KV head are computed together by one thread, each exactly as it would be alone, so
// results do not depend on the thread count.
#include <cstddef>
#include <cstdint>

#include "core/thread_pool.h"

namespace epq {

struct AttentionShape {
  int n_head;
  int n_head_kv;
  int head_dim;
  float scale;  // applied to q.k
};

// Scratch floats attention() needs per thread and position (scores of up to 8 heads).
inline constexpr int kAttentionScoresPerPosition = 8;

// scratch: pool.size() * max_positions * kAttentionScoresPerPosition floats.
void attention(ThreadPool& pool, const AttentionShape& shape, const float* q, const uint16_t* k_cache,
               const uint16_t* v_cache, const int32_t* positions, int64_t n_tokens, float* out, float* scratch,
               int64_t max_positions);

}  // namespace epq
