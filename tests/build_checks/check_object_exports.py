#!/usr/bin/env python3
"""Checks that one object file inside a static library defines no code symbol that the
linker could share with other objects, other than the ones named.

The AVX-512 kernel file is compiled with AVX-512 enabled. An inline function from a shared
header that the compiler left out of line there (a weak symbol) could be the copy the
linker keeps for the whole program, and then an AVX2-only CPU would run AVX-512
instructions outside the kernels. This check fails the build's tests if that happens.

usage: check_object_exports.py LIBRARY MEMBER ALLOWED_SYMBOL...
"""
import subprocess
import sys

CODE_TYPES = set("TWiu")  # global code, weak code, indirect function, unique global


def member_symbols(library, member):
    out = subprocess.run(["nm", "-C", "--defined-only", library], check=True, capture_output=True, text=True).stdout
    symbols, current, found = [], None, False
    for line in out.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            current = line[:-1]
            found = found or current == member
            continue
        if current == member and line.strip():
            parts = line.split(None, 2)  # address, type, name
            if len(parts) == 3:
                symbols.append((parts[1], parts[2]))
    if not found:
        sys.exit(f"{member} is not in {library}")
    return symbols


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    library, member, allowed = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    symbols = member_symbols(library, member)
    exported = {name for kind, name in symbols if kind in CODE_TYPES}
    missing = allowed - exported
    extra = exported - allowed
    if missing:
        sys.exit(f"{member}: expected entry points not defined: {sorted(missing)}")
    if extra:
        sys.exit(f"{member} defines code other objects may link to: {sorted(extra)}")
    print(f"{member}: exports only {sorted(exported)} ({len(symbols)} symbols checked)")


if __name__ == "__main__":
    main()
