#include <cstdlib>
#include <string>

#include "quant/cpu_features.h"
#include "quant/dot.h"
#include "util/error.h"

namespace epq::quant {

namespace {

constexpr Avx512Set kAvx512Sets[] = {Avx512Set::kSplitUnits, Avx512Set::kFullWidth};

}  // namespace

const KernelSet* avx512_kernels() {
  if (!cpu_features().avx512_vnni) return nullptr;
  // AMD family 19h with AVX-512 is Zen 4, whose 512-bit units run 256 bits at a time; 1Ah
  // and later (Zen 5) have full-width units, as every Intel CPU with AVX-512 does.
  const int family = cpu_features().amd_family;
  const Avx512Set which = family == 0x19 ? Avx512Set::kSplitUnits : Avx512Set::kFullWidth;
  return &avx512_kernels_unchecked(which);
}

bool is_avx512(const KernelSet& set) {
  if (!cpu_features().avx512_vnni) return false;
  for (Avx512Set which : kAvx512Sets) {
    if (&set == &avx512_kernels_unchecked(which)) return true;
  }
  return false;
}

namespace {

// The set named `want` (KernelSet::name), where this CPU can run it; null otherwise.
const KernelSet* named_set(const std::string& want) {
  if (want == "scalar") return &scalar_kernels();
  if (want == "avx2") return avx2_kernels();
  if (!cpu_features().avx512_vnni) return nullptr;
  for (Avx512Set which : kAvx512Sets) {
    if (want == avx512_kernels_unchecked(which).name) return &avx512_kernels_unchecked(which);
  }
  return nullptr;
}

const KernelSet& choose() {
  const char* forced = std::getenv("EPQ_KERNELS");
  if (forced != nullptr && *forced != '\0') {
    const KernelSet* set = named_set(forced);
    if (set == nullptr) fail("EPQ_KERNELS={}: not available on this CPU (choose scalar, avx2, avx512 or avx512-full-width)", forced);
    return *set;
  }
  if (const KernelSet* s = avx512_kernels()) return *s;
  if (const KernelSet* s = avx2_kernels()) return *s;
  return scalar_kernels();
}

}  // namespace

const KernelSet& active_kernels() {
  static const KernelSet& s = choose();
  return s;
}

}  // namespace epq::quant
