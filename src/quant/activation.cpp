#include "quant/activation.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/float_bits.h"
#include "quant/reference.h"

namespace epq::quant {

ActFormat activation_format(Type t) {
  switch (t) {
    case Type::F32:
      return ActFormat::kF32;
    case Type::F16:
      return ActFormat::kF16;
    case Type::BF16:
      return ActFormat::kBF16;
    case Type::Q2_K: case Type::Q3_K: case Type::Q4_K: case Type::Q5_K: case Type::Q6_K:
    case Type::Q8_K: case Type::IQ4_XS:
      return ActFormat::kQ8K;
    default:
      return ActFormat::kQ8x32;
  }
}

size_t activation_bytes(ActFormat f, int64_t n) {
  switch (f) {
    case ActFormat::kF32: case ActFormat::kF16: case ActFormat::kBF16: return static_cast<size_t>(n) * sizeof(float);
    case ActFormat::kQ8x32: return static_cast<size_t>(n / 32) * sizeof(BlockQ8x32);
    case ActFormat::kQ8K: return static_cast<size_t>(n / 256) * sizeof(BlockQ8_K);
  }
  return 0;
}

namespace {

// Where element i of n sits in a kBF16 vector: in a whole block of 32, the even elements
// first, then the odd ones; the n % 32 last in place.
int64_t bf16_stored_at(int64_t i, int64_t n) {
  const int64_t block = i / 32 * 32, j = i % 32;
  return block + 32 > n ? i : block + j / 2 + (j % 2) * 16;
}

// Scale and inverse scale for a block with largest magnitude amax; shared by both
// quantizers so that they agree bit for bit.
void block_scale(float amax, float* d, float* id) {
  *d = amax / 127.0f;
  *id = amax > 0 ? 127.0f / amax : 0.0f;
}

float absmax_avx2(const float* x, int n) {
  __m256 m = _mm256_setzero_ps();
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// Quantizes 32 floats to int8 with inverse scale id; the sums of codes 0-15 and 16-31
// to sums[0] and sums[1].
void quantize32_avx2(const float* x, float id, int8_t* q, int* sums) {
  const __m256 mul = _mm256_set1_ps(id);
  __m256i i[4];
  for (int k = 0; k < 4; ++k) {
    __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    i[k] = _mm256_cvtps_epi32(v);
  }
  // Pack 32 int32 -> 32 int8 and undo the lane interleaving of the packs.
  __m256i p16a = _mm256_packs_epi32(i[0], i[1]), p16b = _mm256_packs_epi32(i[2], i[3]);
  __m256i p8 = _mm256_packs_epi16(p16a, p16b);
  p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p8);
  // Codes 0-15 are in i[0], i[1] and 16-31 in i[2], i[3]: two hadds leave the first half's
  // sum in lanes 0 and 4 (four codes each), the second's in lanes 1 and 5.
  __m256i h = _mm256_hadd_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
  h = _mm256_hadd_epi32(h, h);
  const __m128i halves = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  sums[0] = _mm_cvtsi128_si32(halves);
  sums[1] = _mm_extract_epi32(halves, 1);
}

void quantize32_scalar(const float* x, float id, int8_t* q, int* sums) {
  sums[0] = sums[1] = 0;
  for (int i = 0; i < 32; ++i) {
    q[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
    sums[i / 16] += q[i];
  }
}

float absmax_scalar(const float* x, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i) m = std::fmax(m, std::fabs(x[i]));
  return m;
}

template <bool kSimd>
void quantize(ActFormat f, const float* x, void* out, int64_t n) {
  auto absmax = [](const float* v, int k) { return kSimd ? absmax_avx2(v, k) : absmax_scalar(v, k); };
  auto codes = [](const float* v, float id, int8_t* q, int* sums) { kSimd ? quantize32_avx2(v, id, q, sums) : quantize32_scalar(v, id, q, sums); };
  switch (f) {
    case ActFormat::kF32:
      std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case ActFormat::kF16: {
      float* o = static_cast<float*>(out);
      int64_t i = 0;
      if (kSimd) {
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
      }
      for (; i < n; ++i) o[i] = f16_to_f32(f32_to_f16(x[i]));
      return;
    }
    case ActFormat::kBF16:
      for (int64_t i = 0; i < n; ++i) static_cast<float*>(out)[bf16_stored_at(i, n)] = bf16_to_f32(f32_to_bf16(x[i]));
      return;
    case ActFormat::kQ8x32:
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ8x32& blk = static_cast<BlockQ8x32*>(out)[b];
        float id;
        block_scale(absmax(x + 32 * b, 32), &blk.d, &id);
        int sums[2];
        codes(x + 32 * b, id, blk.qs, sums);
        blk.s = blk.d * static_cast<float>(sums[0] + sums[1]);
      }
      return;
    case ActFormat::kQ8K:
      for (int64_t b = 0; b < n / 256; ++b) {
        BlockQ8_K& blk = static_cast<BlockQ8_K*>(out)[b];
        float id;
        block_scale(absmax(x + 256 * b, 256), &blk.d, &id);
        for (int k = 0; k < 8; ++k) {
          int sums[2];
          codes(x + 256 * b + 32 * k, id, blk.qs + 32 * k, sums);
          blk.bsums[2 * k] = static_cast<int16_t>(sums[0]);
          blk.bsums[2 * k + 1] = static_cast<int16_t>(sums[1]);
        }
      }
      return;
  }
}

}  // namespace

void quantize_activation(ActFormat f, const float* x, void* out, int64_t n) { quantize<true>(f, x, out, n); }
void quantize_activation_reference(ActFormat f, const float* x, void* out, int64_t n) { quantize<false>(f, x, out, n); }

void dequantize_activation(ActFormat f, const void* in, float* out, int64_t n) {
  switch (f) {
    case ActFormat::kF32: case ActFormat::kF16:
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case ActFormat::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<const float*>(in)[bf16_stored_at(i, n)];
      return;
    case ActFormat::kQ8x32:
      for (int64_t b = 0; b < n / 32; ++b) {
        const BlockQ8x32& blk = static_cast<const BlockQ8x32*>(in)[b];
        for (int i = 0; i < 32; ++i) out[32 * b + i] = blk.d * blk.qs[i];
      }
      return;
    case ActFormat::kQ8K:
      dequantize_row(Type::Q8_K, in, out, n);
      return;
  }
}

}  // namespace epq::quant
