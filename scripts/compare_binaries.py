#!/usr/bin/python3
"""Prompt and decode speed of two epq binaries on the same model, measured alternately.

    scripts/compare_binaries.py OLD_EPQ NEW_EPQ MODEL [--runs 5] [--prompt-tokens 512]
                                [--gen 128] [-- EXTRA epq run FLAGS]

Each run is `epq run` with a fixed prompt (the text of tests/data/llamacpp/prompt.txt,
repeated to length), greedy, --ignore-eos; the two binaries take turns, so drift in the
machine's speed hits both alike. Prints the median prompt and generation tok/s of each
and the ratio new/old. The model file stays in the page cache (all-in-RAM runs).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

PROMPT_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "llamacpp", "prompt.txt")


def one_run(epq, model, prompt, gen, extra):
    proc = subprocess.run([epq, "run", "-m", model, "-p", prompt, "-n", str(gen), "--temp", "0", "--ignore-eos", *extra],
                          capture_output=True, text=True, errors="replace", check=True)
    m = re.search(r"prompt: (\d+) tokens in [\d.]+ s \(([\d.]+) tok/s\) \| generation: \d+ tokens in [\d.]+ s \(([\d.]+) tok/s\)",
                  proc.stderr)
    if not m:
        raise SystemExit(f"no timing line from {epq}:\n{proc.stderr}")
    return int(m.group(1)), float(m.group(2)), float(m.group(3))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("model")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--prompt-chars", type=int, default=2000, help="characters of prompt text (default 2000)")
    p.add_argument("--gen", type=int, default=128)
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    a = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    a.extra = extra
    with open(PROMPT_FILE, encoding="utf-8") as f:
        text = f.read()
    prompt = (text * (a.prompt_chars // len(text) + 1))[:a.prompt_chars]
    results = {a.old: [], a.new: []}
    one_run(a.new, a.model, prompt, 8, a.extra)  # warm the page cache
    for _ in range(a.runs):
        for epq in (a.old, a.new):
            results[epq].append(one_run(epq, a.model, prompt, a.gen, a.extra))
    med = {epq: (statistics.median(r[1] for r in rs), statistics.median(r[2] for r in rs)) for epq, rs in results.items()}
    n_prompt = results[a.new][0][0]
    print(f"model {a.model}, prompt {n_prompt} tokens, {a.gen} generated, {a.runs} runs each, alternating; flags: {' '.join(a.extra)}")
    print(f"{'binary':<40} {'prompt tok/s':>14} {'decode tok/s':>14}")
    for epq in (a.old, a.new):
        print(f"{epq:<40} {med[epq][0]:>14.2f} {med[epq][1]:>14.2f}")
    print(f"{'new / old':<40} {med[a.new][0] / med[a.old][0]:>14.3f} {med[a.new][1] / med[a.old][1]:>14.3f}")


if __name__ == "__main__":
    main()
