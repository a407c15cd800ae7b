#pragma once
// One task of attention() (core/attention.h): one query token's G query heads that share
// a KV head, against the cache rows the token sees. The kernels for it are written once
// (core/attend_kernel.h) and built for AVX2 (attention.cpp) and AVX-512 (attention_avx512.cpp);
// both give the same bits.
#include <cstddef>
#include <cstdint>

namespace epq {

struct AttendTask {
  const float* q;      // G heads of D floats
  const uint16_t* k;   // the KV head's key in cache row 0 (F16)
  const uint16_t* v;   // the KV head's value in cache row 0 (F16)
  size_t k_stride, v_stride;  // F16s from one cache row to the next
  int D, Dv;                  // key and value dimensions; multiples of 8 (AVX-512: Dv of 16)
  int64_t first, n_pos, rows;  // the visible rows, oldest first: first + j (mod rows) for j < n_pos
  float scale;                 // applied to q.k
  float* scores;               // n_pos x G floats of scratch
  float* packed_q;             // G x D floats of scratch
  float* out;                  // G heads of Dv floats
};

// G = 1, 2, 4 or 8.
void attend_avx2(int G, const AttendTask& task);
// G = 2, 4 or 8. Needs AVX-512 F (quant::avx512_kernels() non-null).
void attend_avx512(int G, const AttendTask& task);
// attend_avx512 built on SIMDe's emulation of AVX-512, for any AVX2 CPU: unit tests only.
void attend_avx512_emulated(int G, const AttendTask& task);

}  // namespace epq
