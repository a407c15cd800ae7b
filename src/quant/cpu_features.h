#pragma once
// What the CPU and the OS support, from CPUID and XGETBV, for choosing a kernel set.
// (Compiler-independent: clang's __builtin_cpu_supports does not know "f16c".)

namespace epq::quant {

struct CpuFeatures {
  bool avx2 = false;        // AVX2, FMA and F16C, with the OS saving the YMM registers
  bool avx512_vnni = false; // AVX-512 F, BW, VL, DQ and VNNI, with the OS saving ZMM and mask registers
  int amd_family = 0;        // an AMD CPU's family (0x17 Zen 1/2, 0x19 Zen 3/4, 0x1A Zen 5); 0 for other vendors
};

const CpuFeatures& cpu_features();

}  // namespace epq::quant
