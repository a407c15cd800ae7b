#!/usr/bin/env python3
"""Checks that a kernel source file builds no 512-bit vector from separate elements with
SIMDe's set/setr functions (simde_mm512_set_epi32, simde_mm512_setr_epi64, ...).

SIMDe implements them element by element: with GCC 12 one simde_mm512_set_epi32 call
compiled to 16 masked broadcasts, where the native intrinsic is one load of a constant.
Inside a kernel's loop that cost the Q4_K/Q5_K/Q6_K prompt kernels 10-16 % (see
docs/PERFORMANCE.md, "what SIMDe's set_epi32 cost"). Use a constant table and a load
(kSpread4 in dot_avx512.cpp) instead. set1 (one broadcast) and setzero are fine.

usage: check_no_simde_set.py SOURCE...
"""
import re
import sys

SET_FROM_ELEMENTS = re.compile(r"\bsimde_mm512_setr?_(epi8|epi16|epi32|epi64|ps|pd)\b")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    found = []
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as source:
            for number, line in enumerate(source, 1):
                if SET_FROM_ELEMENTS.search(line.split("//", 1)[0]):
                    found.append(f"{path}:{number}: {line.strip()}")
    if found:
        print("SIMDe set/setr of separate elements (use a constant table and a load):")
        print("\n".join(found))
        return 1
    print(f"no SIMDe set/setr of separate elements in {len(sys.argv) - 1} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
