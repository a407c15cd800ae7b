#include <cstdlib>
#include <string>

#include "quant/cpu_features.h"
#include "quant/dot.h"
#include "util/error.h"

namespace epq::quant {

const KernelSet* avx512_kernels() { return cpu_features().avx512_vnni ? &avx512_kernels_unchecked() : nullptr; }

namespace {

const KernelSet& choose() {
  const char* forced = std::getenv("EPQ_KERNELS");
  if (forced != nullptr && *forced != '\0') {
    std::string want = forced;
    const KernelSet* set = want == "scalar" ? &scalar_kernels() : want == "avx2" ? avx2_kernels() : want == "avx512" ? avx512_kernels() : nullptr;
    if (set == nullptr) fail("EPQ_KERNELS={}: not available on this CPU (choose scalar, avx2 or avx512)", want);
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
