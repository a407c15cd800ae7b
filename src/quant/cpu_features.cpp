#include "quant/cpu_features.h"

#include <cpuid.h>

#include <cstdint>

namespace epq::quant {
namespace {

bool bit(uint32_t reg, int b) { return ((reg >> b) & 1) != 0; }

// XCR0: which register states the OS saves on a context switch.
uint64_t os_saved_state() {
  uint32_t lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

// Leaf 0's vendor string is EBX, EDX, ECX: "Auth" "enti" "cAMD" for AMD. Leaf 1 EAX bits
// 8-11 are the family, plus bits 20-27 where those read 0xF.
int amd_family(uint32_t leaf1_eax) {
  uint32_t eax, ebx, ecx, edx;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0 || ebx != 0x68747541 || edx != 0x69746E65 || ecx != 0x444D4163) return 0;
  const uint32_t base = (leaf1_eax >> 8) & 0xF;
  return static_cast<int>(base == 0xF ? base + ((leaf1_eax >> 20) & 0xFF) : base);
}

CpuFeatures detect() {
  CpuFeatures f;
  uint32_t eax, ebx, ecx1, edx;
  if (__get_cpuid_count(1, 0, &eax, &ebx, &ecx1, &edx) == 0) return f;
  f.amd_family = amd_family(eax);
  if (!bit(ecx1, 27)) return f;  // 27: OSXSAVE
  uint32_t ebx7 = 0, ecx7 = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx7, &ecx7, &edx) == 0) return f;
  const uint64_t xcr0 = os_saved_state();
  const bool ymm_saved = (xcr0 & 0x6) == 0x6;      // SSE and AVX state
  const bool zmm_saved = (xcr0 & 0xE6) == 0xE6;    // and opmask, ZMM_Hi256, Hi16_ZMM
  // Leaf 1 ECX: 12 FMA, 28 AVX, 29 F16C. Leaf 7 EBX: 5 AVX2, 16 F, 17 DQ, 30 BW, 31 VL; ECX: 11 VNNI.
  f.avx2 = ymm_saved && bit(ecx1, 12) && bit(ecx1, 28) && bit(ecx1, 29) && bit(ebx7, 5);
  f.avx512_vnni = f.avx2 && zmm_saved && bit(ebx7, 16) && bit(ebx7, 17) && bit(ebx7, 30) && bit(ebx7, 31) && bit(ecx7, 11);
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace epq::quant
