#pragma once
// Causal grouped-query attention over an F16 key/value cache. Query token t (at absolute
// position p = positions[t]) attends to positions 0..p, or with a sliding window of W to
// p-W+1..p; query head h reads KV head h / (n_head / n_head_kv). Position j's key and
// value are in cache row j % cache_rows: a full cache has a row per position, a
// sliding-window cache is a ring of at least W + (batch - 1) rows. Each KV head has its
// own block of cache_rows rows, head g's first (key row r of head g at k_cache +
// (g * cache_rows + r) * k_row()), so that a head's keys and values are each one
// contiguous stream. Keys have head_dim and values value_dim floats per row; MLA's values
// are the first value_dim floats of its key rows (one KV head, v_cache = k_cache,
// value_row = the key row's width). Work is split by (token, KV head); the query heads sharing a
// KV head are computed together by one thread, each exactly as it would be alone, so
// results do not depend on the thread count. Where the dot kernels are the AVX-512 set,
// the work runs on 512-bit vectors (core/attend_kernel.h), with the same bits as AVX2.
#include <cstddef>
#include <cstdint>

#include "core/thread_pool.h"

namespace epq {

struct AttentionShape {
  int n_head;
  int n_head_kv;
  int head_dim;
  float scale;     // applied to q.k
  int window = 0;  // sliding window in positions, 0 for none
  int value_dim = 0;    // 0: head_dim
  int value_row = 0;    // F16s from one value row to the next, 0: value_dim
  int dv() const { return value_dim > 0 ? value_dim : head_dim; }
  size_t k_row() const { return static_cast<size_t>(head_dim); }
  size_t v_row() const { return static_cast<size_t>(value_row > 0 ? value_row : dv()); }
  // F16s from the cache's start to KV head g's key (value) in row r of cache_rows.
  size_t k_at(int g, int64_t r, int64_t cache_rows) const { return static_cast<size_t>(g * cache_rows + r) * k_row(); }
  size_t v_at(int g, int64_t r, int64_t cache_rows) const { return static_cast<size_t>(g * cache_rows + r) * v_row(); }
};

// Floats of scratch attention() needs: scores of up to 8 heads for every position a query
// can see, and 8 heads' queries, per thread.
size_t attention_scratch_floats(const AttentionShape& shape, int64_t cache_rows, int n_threads);

void attention(ThreadPool& pool, const AttentionShape& shape, const float* q, const uint16_t* k_cache,
               const uint16_t* v_cache, int64_t cache_rows, const int32_t* positions, int64_t n_tokens, float* out,
               float* scratch);

}  // namespace epq
