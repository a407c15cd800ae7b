#pragma once
// Deterministic, cheap random numbers for synthesized weights. Every stream is keyed by
// (seed, tensor, row), so a file's bytes depend only on the seed, never on threading.
#include <cstdint>

namespace epq::synth {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t stream_key(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t s = seed;
  uint64_t k = splitmix64(s) ^ (a * 0xD6E8FEB86659FD93ull);
  s = k;
  k = splitmix64(s) ^ (b * 0xA0761D6478BD642Full);
  s = k;
  return splitmix64(s);
}

// Approximately standard normal values: Irwin-Hall sums of four 16-bit uniforms.
class NormalStream {
 public:
  explicit NormalStream(uint64_t key) : state_(key) {}
  float next() {
    uint64_t r = splitmix64(state_);
    uint64_t sum = (r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48) + 2;
    return (static_cast<float>(sum) / 65536.0f - 2.0f) * 1.7320508f;  // mean 2, variance 1/3
  }

 private:
  uint64_t state_;
};

}  // namespace epq::synth
