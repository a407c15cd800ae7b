// Kernel benchmarks.
// - Matvec/TYPE/THREADS/COLS: matrix-vector products per weight type, measured as bytes
//   of weights streamed per second, next to a STREAM-style read-bandwidth probe with the
//   same threads (probe_GB/s), and their ratio (of_probe). A probe pass follows each
//   kernel pass, and each figure sums its passes, so both see the same moments.
//   Rows of 4096 columns for every type; also 768 for the K and 32-element formats, the
//   width of an expert's down projection in Qwen3-30B-A3B. Matvec/TYPE/rows4: the
//   formats of the four-row layout that weights in the process's memory get on CPUs whose
//   kernel set reads it (quant/rows4_layout.h), in that layout.
// - MatvecExperts/Q4_K/rows4/threads:2: the same bytes as one matrix (whole_GB/s) and as
//   expert-sized matrices 16 to a parallel loop, as decode's gate and up (experts_GB/s),
//   and the second's share of the first (of_whole).
// - Matmul/TYPE/tokens:N: prompt processing's case, one expert-sized matrix (768 x 2048,
//   cache-resident) times N token columns (1-8, the sizes of the kernels' calls, and 64),
//   measured in multiply-adds per second (GMAC/s): this is compute-bound, and shows how
//   well a kernel amortizes decoding a weight block. Matmul/TYPE/rows4: the same in the
//   layout of quant/rows4_layout.h that the kernel set reads (four rows, or sixteen for Q3_K
//   and, on a Zen 4, Q4_K, Q5_K and Q6_K). MatmulDram/TYPE/tokens:N: 64 such
//   matrices (56 MB of Q4_K, past L3), so that the weights come from DRAM as a prompt's
//   experts do, each row tile once for the N tokens (in groups of up to 8); /rows4 in that layout.
// - Attend/SET/positions:N/heads:G: one attention task (core/attend_task.h) of G query
//   heads of 128 dimensions sharing a KV head (qwen3-30b-a3b: 8), against N cached positions,
//   on one core, with the AVX2 kernel and (CPUs with AVX-512) the AVX-512 kernel, in
//   multiply-adds per second (GMAC/s, q.k and the weighted values together).
// - Rearrange/TYPE: quant::to_rows4_layout on 64 expert-sized matrices (768 x 2048, past
//   L3), as the loader and the pager run it on one core, in bytes per second.
// - Int8Peak: the ceiling for those kernels on one core, a loop of nothing but the
//   vpmaddubsw + vpmaddwd + vpaddd sequence they use, on data in L1 (GMAC/s).
// - VnniPeak (CPUs with AVX-512 VNNI): the same for 512-bit vpdpbusd alone, the most an
//   AVX-512 integer kernel can reach on one core.
// - VnniBroadcastPeak/groups:G: vpdpbusd against 128-bit broadcasts of activations, each
//   broadcast feeding G vpdpbusd, as the four-rows-per-register K kernels do.
//
//   build/bench/epq_kernel_bench [--benchmark_filter=Q4_K] [--benchmark_min_time=1]
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <chrono>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "core/attend_task.h"
#include "core/matmul.h"
#include "core/thread_pool.h"
#include "quant/activation.h"
#include "quant/cpu_features.h"
#include "quant/dot.h"
#include "quant/float_bits.h"
#include "quant/reference.h"
#include "quant/rows4_layout.h"
#include "quant/types.h"
#include "util/buffer.h"

namespace {

using epq::quant::Type;

constexpr size_t kWeightBytes = size_t{512} << 20;  // far larger than any cache

// One read pass over `buffer` with the pool's threads, each summing its share with
// 256-bit loads; returns the seconds it took.
double probe_pass(epq::ThreadPool& pool, const epq::Buffer& buffer) {
  const size_t share = buffer.size() / static_cast<size_t>(pool.size());
  std::vector<long long> sink(static_cast<size_t>(pool.size()));
  const auto start = std::chrono::steady_clock::now();
  pool.run(pool.size(), [&](int64_t t, int) {
    const auto* p = reinterpret_cast<const __m256i*>(buffer.data() + static_cast<size_t>(t) * share);
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i < share / 32; i += 4) {
      a = _mm256_add_epi64(a, _mm256_load_si256(p + i));
      b = _mm256_add_epi64(b, _mm256_load_si256(p + i + 1));
      c = _mm256_add_epi64(c, _mm256_load_si256(p + i + 2));
      d = _mm256_add_epi64(d, _mm256_load_si256(p + i + 3));
    }
    sink[static_cast<size_t>(t)] = _mm256_extract_epi64(_mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)), 0);
  });
  benchmark::DoNotOptimize(sink.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

epq::Buffer& probe_buffer() {
  static epq::Buffer buffer(size_t{1} << 30);
  return buffer;
}

// Read bandwidth with n threads: the best of five passes.
double probe_bandwidth(epq::ThreadPool& pool) {
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) best = std::max(best, static_cast<double>(probe_buffer().size()) / probe_pass(pool, probe_buffer()));
  return best;
}

double probe(int threads) {
  static std::map<int, double> cache;
  if (!cache.count(threads)) {
    epq::ThreadPool pool(threads);
    cache[threads] = probe_bandwidth(pool);
  }
  return cache[threads];
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) state.SetIterationTime(1.0);
  state.counters["GB/s"] = probe(threads) / 1e9;
}

// rows x cols random values quantized to type.
std::vector<uint8_t> random_weights(Type type, int64_t rows, int64_t cols) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (float& v : x) v = normal(rng);
  std::vector<uint8_t> w(static_cast<size_t>(rows * epq::quant::row_bytes(type, cols)));
  epq::quant::quantize_row(type, x.data(), w.data(), rows * cols);
  return w;
}

// rows x cols weights of `type` past every cache, one random 64-row tile repeated (the
// content does not change the speed), in the four-row layout if rows4.
epq::Buffer tiled_weights(Type type, int64_t rows, int64_t cols, bool rows4) {
  const size_t row_bytes = static_cast<size_t>(epq::quant::row_bytes(type, cols));
  epq::Buffer weights(static_cast<size_t>(rows) * row_bytes);
  const std::vector<uint8_t> tile = random_weights(type, 64, cols);
  for (int64_t r = 0; r < rows; r += 64) {
    std::memcpy(weights.data() + static_cast<size_t>(r) * row_bytes, tile.data(), std::min<size_t>(64, static_cast<size_t>(rows - r)) * row_bytes);
  }
  if (rows4) epq::quant::to_rows4_layout(type, weights.data(), rows, cols);
  return weights;
}

// One token's activations for `type`'s kernels, every input 0.5.
std::vector<uint8_t> one_token(Type type, int64_t cols) {
  const std::vector<float> x(static_cast<size_t>(cols), 0.5f);
  const epq::quant::ActFormat f = epq::quant::activation_format(type);
  std::vector<uint8_t> act(epq::quant::activation_bytes(f, cols));
  epq::quant::quantize_activation(f, x.data(), act.data(), cols);
  return act;
}

void BM_Matvec(benchmark::State& state, Type type, bool rows4) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t cols = state.range(1);
  const size_t row_bytes = static_cast<size_t>(epq::quant::row_bytes(type, cols));
  const int64_t rows = static_cast<int64_t>(kWeightBytes / row_bytes);
  const epq::Buffer weights = tiled_weights(type, rows, cols, rows4);
  const std::vector<uint8_t> act = one_token(type, cols);
  std::vector<float> out(static_cast<size_t>(rows));
  const epq::Matrix w{type, weights.data(), rows, cols, row_bytes, rows4};
  epq::ThreadPool pool(threads);
  const epq::MatmulJob job{&w, act.data(), act.size(), 1, out.data(), static_cast<size_t>(rows)};
  // Each pass of the kernel is followed by a pass of the read probe with the same threads,
  // and the figures are the sums over all passes: on a shared machine the bandwidth
  // available moves by 2x within seconds, so only figures taken in the same moments compare.
  double seconds = 0, probe_seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    epq::run_matmuls(pool, {&job, 1});
    benchmark::DoNotOptimize(out.data());
    const double pass = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(pass);
    seconds += pass;
    probe_seconds += probe_pass(pool, probe_buffer());
  }
  const double bytes = static_cast<double>(weights.size()) * static_cast<double>(state.iterations());
  const double probe_rate = static_cast<double>(probe_buffer().size()) * static_cast<double>(state.iterations()) / probe_seconds;
  state.counters["GB/s"] = bytes / seconds / 1e9;
  state.counters["probe_GB/s"] = probe_rate / 1e9;
  state.counters["of_probe"] = bytes / seconds / probe_rate;
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

// Decode's expert products against one long matrix, over the same bytes in the same
// iteration: the buffer as one matrix, then as 768 x 2048 experts (Qwen3-30B-A3B's gate
// or up), 16 at a time in one run_matmuls as a layer's gate and up are, in scattered order.
// The two rates differ by what a region of small matrices costs: starts, switches, ends.
void BM_MatvecExperts(benchmark::State& state, Type type, bool rows4) {
  const int threads = static_cast<int>(state.range(0));
  constexpr int64_t kCols = 2048, kExpertRows = 768, kPerRegion = 16;
  const size_t row_bytes = static_cast<size_t>(epq::quant::row_bytes(type, kCols));
  const size_t expert_bytes = static_cast<size_t>(kExpertRows) * row_bytes;
  const int64_t experts = static_cast<int64_t>(kWeightBytes / expert_bytes) / kPerRegion * kPerRegion;
  const int64_t rows = experts * kExpertRows;
  const epq::Buffer weights = tiled_weights(type, rows, kCols, rows4);
  const std::vector<uint8_t> act = one_token(type, kCols);
  std::vector<float> out(static_cast<size_t>(rows));
  epq::ThreadPool pool(threads);
  const epq::Matrix whole{type, weights.data(), rows, kCols, row_bytes, rows4};
  const epq::MatmulJob one{&whole, act.data(), act.size(), 1, out.data(), static_cast<size_t>(rows)};
  std::vector<epq::Matrix> matrices;
  std::vector<epq::MatmulJob> jobs;
  matrices.reserve(static_cast<size_t>(experts));
  int64_t stride = 5;  // prime to the count, so that e * stride visits each slot once
  while (std::gcd(stride, experts) != 1) stride += 2;
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t slot = e * stride % experts;
    matrices.push_back({type, weights.data() + static_cast<size_t>(slot) * expert_bytes, kExpertRows, kCols, row_bytes, rows4});
    jobs.push_back({&matrices.back(), act.data(), act.size(), 1, out.data() + slot * kExpertRows, static_cast<size_t>(kExpertRows)});
  }
  double whole_seconds = 0, expert_seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    epq::run_matmuls(pool, {&one, 1});
    const auto middle = std::chrono::steady_clock::now();
    for (size_t e = 0; e < jobs.size(); e += kPerRegion) epq::run_matmuls(pool, std::span(jobs).subspan(e, kPerRegion));
    const auto end = std::chrono::steady_clock::now();
    whole_seconds += std::chrono::duration<double>(middle - start).count();
    expert_seconds += std::chrono::duration<double>(end - middle).count();
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
  }
  const double bytes = static_cast<double>(weights.size()) * static_cast<double>(state.iterations());
  state.counters["whole_GB/s"] = bytes / whole_seconds / 1e9;
  state.counters["experts_GB/s"] = bytes / expert_seconds / 1e9;
  state.counters["of_whole"] = whole_seconds / expert_seconds;
}

void BM_Rearrange(benchmark::State& state, Type type) {
  const int64_t rows = 768, cols = 2048, matrices = 64;
  const size_t matrix_bytes = static_cast<size_t>(rows * epq::quant::row_bytes(type, cols));
  std::vector<uint8_t> weights = random_weights(type, rows * matrices, cols);
  for (auto _ : state) {
    for (int64_t m = 0; m < matrices; ++m) epq::quant::to_rows4_layout(type, weights.data() + static_cast<size_t>(m) * matrix_bytes, rows, cols);
    benchmark::DoNotOptimize(weights.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * weights.size()));
}

void BM_Matmul(benchmark::State& state, Type type, bool rows4, int64_t matrices) {
  const int64_t rows = 768 * matrices, kIn = 2048;  // an expert's gate or up matrix in Qwen3-30B-A3B
  const int64_t tokens = state.range(0);
  // Weights and activations page-aligned, as the engine's are (epq::Buffer): from a
  // std::vector, the activations' 64-byte loads straddled cache lines and the AVX-512 BF16
  // kernel ran 4-12% slower (docs/PERFORMANCE.md, stop 64).
  const std::vector<uint8_t> random = random_weights(type, rows, kIn);
  epq::Buffer weights(random.size());
  std::memcpy(weights.data(), random.data(), random.size());
  if (rows4) epq::quant::to_rows4_layout(type, weights.data(), rows, kIn);
  const epq::quant::ActFormat f = epq::quant::activation_format(type);
  const size_t act_stride = epq::quant::activation_bytes(f, kIn);
  epq::Buffer act(act_stride * static_cast<size_t>(tokens));
  std::vector<float> x(kIn);
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0, 1);
  for (int64_t t = 0; t < tokens; ++t) {
    for (float& v : x) v = normal(rng);
    epq::quant::quantize_activation(f, x.data(), act.data() + static_cast<size_t>(t) * act_stride, kIn);
  }
  std::vector<float> out(static_cast<size_t>(rows * tokens));
  const epq::Matrix w{type, weights.data(), rows, kIn, static_cast<size_t>(epq::quant::row_bytes(type, kIn)), rows4};
  epq::ThreadPool pool(1);
  const epq::MatmulJob job{&w, act.data(), act_stride, tokens, out.data(), static_cast<size_t>(rows)};
  for (auto _ : state) {
    epq::run_matmuls(pool, {&job, 1});
    benchmark::DoNotOptimize(out.data());
  }
  const double macs = static_cast<double>(rows * kIn * tokens) * static_cast<double>(state.iterations());
  state.counters["GMAC/s"] = benchmark::Counter(macs / 1e9, benchmark::Counter::kIsRate);
}

void BM_Attend(benchmark::State& state, void (*kernel)(int, const epq::AttendTask&)) {
  constexpr int kDim = 128;
  const int64_t n_pos = state.range(0);
  const int kHeads = static_cast<int>(state.range(1));
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> q(kHeads * kDim), out(kHeads * kDim), packed(kHeads * kDim), scores(static_cast<size_t>(n_pos) * kHeads);
  std::vector<uint16_t> k(static_cast<size_t>(n_pos) * kDim), v(k.size());
  for (float& x : q) x = normal(rng);
  for (uint16_t& x : k) x = epq::quant::f32_to_f16(normal(rng));
  for (uint16_t& x : v) x = epq::quant::f32_to_f16(normal(rng));
  const epq::AttendTask task{.q = q.data(), .k = k.data(), .v = v.data(), .k_stride = kDim, .v_stride = kDim, .D = kDim, .Dv = kDim,
                             .first = 0, .n_pos = n_pos, .rows = n_pos, .scale = 0.088f, .scores = scores.data(),
                             .packed_q = packed.data(), .out = out.data()};
  for (auto _ : state) {
    kernel(kHeads, task);
    benchmark::DoNotOptimize(out.data());
  }
  const double macs = static_cast<double>(n_pos * kHeads * 2 * kDim) * static_cast<double>(state.iterations());
  state.counters["GMAC/s"] = benchmark::Counter(macs / 1e9, benchmark::Counter::kIsRate);
}

void BM_Int8Peak(benchmark::State& state) {
  alignas(32) static int8_t act[8][256];
  alignas(32) static uint8_t weights[256];
  for (int i = 0; i < 256; ++i) {
    weights[i] = static_cast<uint8_t>(i & 15);
    for (int c = 0; c < 8; ++c) act[c][i] = static_cast<int8_t>(i * 7 + c);
  }
  __m256i scale = _mm256_set1_epi16(3);
  __m256i sum[8];
  for (__m256i& v : sum) v = _mm256_setzero_si256();
  int64_t blocks = 0;  // 256 elements x 8 columns each
  for (auto _ : state) {
    for (int rep = 0; rep < 1000; ++rep) {
      for (int j = 0; j < 8; ++j) {  // one 256-element block against 8 columns
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(weights + 32 * j));
        for (int c = 0; c < 8; ++c) {
          const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(act[c] + 32 * j));
          sum[c] = _mm256_add_epi32(sum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), scale));
        }
      }
      __asm__ volatile("" : "+x"(scale));  // keeps the compiler from hoisting the loop body
    }
    blocks += 1000;
  }
  benchmark::DoNotOptimize(sum);
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(blocks) * 256 * 8 / 1e9, benchmark::Counter::kIsRate);
}

// The AVX-512 VNNI ceiling: nothing but vpdpbusd on 512-bit vectors, 8 independent sums.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void BM_VnniPeak(benchmark::State& state) {
  alignas(64) static uint8_t weights[256];
  alignas(64) static int8_t act[8][64];
  for (int i = 0; i < 256; ++i) weights[i] = static_cast<uint8_t>(i & 15);
  for (int c = 0; c < 8; ++c) {
    for (int i = 0; i < 64; ++i) act[c][i] = static_cast<int8_t>(i * 7 + c);
  }
  __m512i a[8], sum[8];
  for (int c = 0; c < 8; ++c) a[c] = _mm512_load_si512(act[c]), sum[c] = _mm512_setzero_si512();
  int64_t steps = 0;  // 4 weight vectors x 8 columns x 64 products each
  for (auto _ : state) {
    for (int rep = 0; rep < 1000; ++rep) {
      for (int j = 0; j < 4; ++j) {
        const __m512i w = _mm512_load_si512(weights + 64 * j);
        for (int c = 0; c < 8; ++c) sum[c] = _mm512_dpbusd_epi32(sum[c], w, a[c]);
      }
      __asm__ volatile("" : "+v"(a[0]));  // keeps the compiler from hoisting the loop body
    }
    steps += 1000;
  }
  benchmark::DoNotOptimize(sum);
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(steps) * 4 * 8 * 64 / 1e9, benchmark::Counter::kIsRate);
}

// vpdpbusd on 512-bit vectors with one operand a 128-bit broadcast from memory, as in the
// four-rows-per-register kernels (16 activations against four rows): each broadcast feeds
// G vpdpbusd, one per weight vector (group of four rows), 8 x G independent sums.
// (GCC 12's _mm512_broadcast_i32x4 starts from an undefined vector, which -Wmaybe-uninitialized
// reports, GCC bug 105593: off for this function, as src/util/avx512.h does.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <int G>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void BM_VnniBroadcastPeak(benchmark::State& state) {
  alignas(64) static uint8_t weights[G][256];
  alignas(64) static int8_t act[8][64];
  for (int g = 0; g < G; ++g) {
    for (int i = 0; i < 256; ++i) weights[g][i] = static_cast<uint8_t>((i + g) & 15);
  }
  for (int c = 0; c < 8; ++c) {
    for (int i = 0; i < 64; ++i) act[c][i] = static_cast<int8_t>(i * 7 + c);
  }
  __m512i sum[G][8];
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < 8; ++c) sum[g][c] = _mm512_setzero_si512();
  }
  int64_t steps = 0;  // 4 x G weight vectors x 8 columns x 64 products each
  for (auto _ : state) {
    for (int rep = 0; rep < 1000; ++rep) {
      for (int j = 0; j < 4; ++j) {
        __m512i w[G];
        for (int g = 0; g < G; ++g) w[g] = _mm512_load_si512(weights[g] + 64 * j);
        for (int c = 0; c < 8; ++c) {
          const __m512i a = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(act[c] + 16 * j)));
          for (int g = 0; g < G; ++g) sum[g][c] = _mm512_dpbusd_epi32(sum[g][c], w[g], a);
        }
      }
      __asm__ volatile("" ::: "memory");  // keeps the compiler from hoisting the loop body
    }
    steps += 1000;
  }
  benchmark::DoNotOptimize(sum);
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(steps) * 4 * G * 8 * 64 / 1e9, benchmark::Counter::kIsRate);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void register_all() {
  const int all = epq::physical_core_count();
  benchmark::RegisterBenchmark("ReadBandwidth", BM_ReadBandwidth)->Arg(1)->Arg(all)->UseManualTime()->Iterations(1);
  for (Type t : {Type::Q4_K, Type::Q6_K, Type::Q8_0, Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::Q2_K, Type::Q3_K,
                 Type::Q5_K, Type::Q8_K, Type::IQ4_NL, Type::IQ4_XS, Type::MXFP4, Type::F16, Type::BF16, Type::F32}) {
    for (bool rows4 : {false, true}) {
      if (rows4 && epq::quant::dot_kernel_rows4(epq::quant::active_kernels(), t) == nullptr) continue;
      const std::string name = std::string("Matvec/") + epq::quant::name(t) + (rows4 ? "/rows4" : "");
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Matvec, t, rows4);
      b->ArgNames({"threads", "cols"})->Unit(benchmark::kMillisecond)->UseManualTime();
      for (int64_t cols : {int64_t{4096}, int64_t{2048}, int64_t{768}}) {
        if (cols == 768 && epq::quant::info(t).block_elems == 1) continue;
        if (cols == 2048 && t != Type::Q8_0) continue;  // where Q8_0's two layouts cross
        b->Args({1, cols})->Args({all, cols});
      }
    }
  }
  for (Type t : {Type::Q4_K, Type::Q5_K, Type::Q6_K, Type::Q4_0, Type::IQ4_NL, Type::Q8_0}) {
    if (epq::quant::dot_kernel_rows4(epq::quant::active_kernels(), t) == nullptr) continue;
    benchmark::RegisterBenchmark((std::string("Rearrange/") + epq::quant::name(t)).c_str(), BM_Rearrange, t)->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  benchmark::RegisterBenchmark("Int8Peak", BM_Int8Peak)->Unit(benchmark::kMicrosecond)->UseRealTime();
  if (epq::quant::cpu_features().avx512_vnni) {
    benchmark::RegisterBenchmark("VnniPeak", BM_VnniPeak)->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark("VnniBroadcastPeak/groups:1", BM_VnniBroadcastPeak<1>)->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark("VnniBroadcastPeak/groups:2", BM_VnniBroadcastPeak<2>)->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
  auto attend_shapes = [](benchmark::internal::Benchmark* b) {
    b->ArgNames({"positions", "heads"})->Args({512, 8})->Args({4096, 8})->Args({512, 4})->Args({512, 2})->UseRealTime();
  };
  benchmark::RegisterBenchmark("Attend/avx2", BM_Attend, epq::attend_avx2)->Apply(attend_shapes);
  if (epq::quant::avx512_kernels() != nullptr) benchmark::RegisterBenchmark("Attend/avx512", BM_Attend, epq::attend_avx512)->Apply(attend_shapes);
  for (Type t : {Type::Q4_K, Type::Q6_K, Type::Q8_0, Type::Q5_K, Type::Q3_K, Type::Q2_K, Type::IQ4_NL, Type::IQ4_XS, Type::Q4_0,
                 Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::MXFP4, Type::BF16}) {
    for (bool rows4 : {false, true}) {
      if (rows4 && epq::quant::dot_kernel_rows4(epq::quant::active_kernels(), t) == nullptr) continue;
      const std::string name = std::string("Matmul/") + epq::quant::name(t) + (rows4 ? "/rows4" : "");
      benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, t, rows4, 1)
          ->ArgName("tokens")
          ->Arg(1)->Arg(2)->Arg(3)
          ->Arg(4)->Arg(5)->Arg(6)->Arg(7)
          ->Arg(8)
          ->Arg(64)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  for (bool rows4 : {false, true}) {
    if (rows4 && epq::quant::dot_kernel_rows4(epq::quant::active_kernels(), Type::Q4_K) == nullptr) continue;  // AVX2-only CPUs
    benchmark::RegisterBenchmark(rows4 ? "MatvecExperts/Q4_K/rows4" : "MatvecExperts/Q4_K", BM_MatvecExperts, Type::Q4_K, rows4)
        ->ArgName("threads")
        ->Arg(2)
        ->Iterations(20)
        ->UseManualTime();
  }
  for (Type t : {Type::Q4_K, Type::Q5_K, Type::Q6_K, Type::Q8_0}) {
    for (bool rows4 : {false, true}) {
      if (rows4 && epq::quant::dot_kernel_rows4(epq::quant::active_kernels(), t) == nullptr) continue;
      const std::string name = std::string("MatmulDram/") + epq::quant::name(t) + (rows4 ? "/rows4" : "");
      benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, t, rows4, 64)
          ->ArgName("tokens")
          ->Arg(1)->Arg(6)->Arg(8)->Arg(16)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("epq_kernels", epq::quant::active_kernels().name);  // EPQ_KERNELS chooses another
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
