#!/usr/bin/python3
"""Compare the numpy reference with llama.cpp's logits in a reference folder.

    compare_llamacpp.py DIR [--emulate-q8-activations]
                        [--delta-form recurrent|chunked] [--chunk N] [--float32]
                        [--no-kv-f16] [--matrix]

DIR holds model.gguf, tokens.i32 (int32 token ids), logits.f32 (llama.cpp's float32
logits [n_tokens][n_vocab], all tokens in one batch) and logits-one-at-a-time.f32 (the
same fed one token per decode call); see /work/shared/reference/README.md. For each of
the two logits files it prints: the root-mean-square logit difference over all positions
and the vocabulary as a fraction of the standard deviation of llama.cpp's logits, the
fraction of positions where the two agree on the top-1 token, and the largest |difference|.
The folder's README calls a quantized model matched at rms <= 3% of the std and top-1
agreement >= 0.9, a model on the F32 files (deepseek2, xing4_0; made with an F32 KV
cache: compare with --no-kv-f16) at rms <= 0.5% and top-1 >= 0.98.

--matrix runs float64 with and without --emulate-q8-activations (the engine's and
llama.cpp's rounding of every product's input), for qwen35moe recurrent and chunked, one
line each, and the two delta-rule forms against each other (with --no-kv-f16: an F32 KV
cache). --delta-form and --chunk apply to qwen35moe only. The reference model follows
general.architecture (run_reference.MODELS: qwen3moe, qwen35moe, laguna, deepseek2,
xing4_0).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from gguf_reader import GGUFFile  # noqa: E402
from run_reference import MODELS  # noqa: E402

LOGITS_FILES = ("logits.f32", "logits-one-at-a-time.f32")


def load(folder):
    """(model path, tokens, {file name: logits float64 [n_tokens, n_vocab]})."""
    tokens = np.fromfile(os.path.join(folder, "tokens.i32"), dtype="<i4")
    logits = {}
    for name in LOGITS_FILES:
        values = np.fromfile(os.path.join(folder, name), dtype="<f4")
        if values.size % len(tokens):
            raise ValueError(f"{name}: {values.size} floats is not {len(tokens)} rows")
        logits[name] = values.reshape(len(tokens), -1).astype(np.float64)
    return os.path.join(folder, "model.gguf"), tokens, logits


def metrics(mine, theirs):
    """(rms difference / std of theirs, top-1 agreement, max |difference|)."""
    mine = np.asarray(mine, dtype=np.float64)[:, :theirs.shape[1]]
    diff = mine - theirs
    return (float(np.sqrt(np.mean(diff * diff)) / np.std(theirs)),
            float(np.mean(mine.argmax(axis=1) == theirs.argmax(axis=1))),
            float(np.max(np.abs(diff))))


def assert_matches(test, logits, llama, max_rms, min_top1):
    """A unittest check: logits within max_rms and min_top1 of each of llama.cpp's files."""
    for name in LOGITS_FILES:
        with test.subTest(logits=name):
            rms, top1, _ = metrics(logits, llama[name])
            test.assertLessEqual(rms, max_rms)
            test.assertGreaterEqual(top1, min_top1)


def model_class(path):
    arch = GGUFFile(path).metadata.get("general.architecture")
    if arch not in MODELS:
        raise SystemExit(f"{path}: architecture {arch!r} has no reference model "
                         f"(known: {', '.join(sorted(MODELS))})")
    return MODELS[arch]


def run(path, tokens, **options):
    """(logits, seconds) of one forward pass over all tokens."""
    t0 = time.perf_counter()
    cls = model_class(path)
    if cls.ARCH != "qwen35moe":
        options = {k: v for k, v in options.items() if k not in ("delta_form", "chunk")}
    logits = cls(path, **options).forward(tokens)
    return logits, time.perf_counter() - t0


def describe(options):
    dtype = options.get("dtype", np.float64)
    words = [np.dtype(dtype).name]
    words.append("q8" if options.get("emulate_q8") else "no-q8")
    if not options.get("kv_f16", True):
        words.append("f32-kv")
    if "delta_form" in options:
        form = options["delta_form"]
        words.append(form if form == "recurrent" else f"chunked/{options.get('chunk', 64)}")
    return " ".join(words)


def report(label, logits, theirs, seconds):
    cells = []
    for name in LOGITS_FILES:
        rms, top1, worst = metrics(logits, theirs[name])
        cells.append(f"{name}: rms/std {100 * rms:.3g}%  top-1 {top1:.3f}  max {worst:.3g}")
    print(f"{label:<34} {seconds:5.1f}s | " + " | ".join(cells))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--emulate-q8-activations", action="store_true")
    parser.add_argument("--delta-form", choices=("recurrent", "chunked"), default="recurrent")
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--float32", action="store_true")
    parser.add_argument("--no-kv-f16", dest="kv_f16", action="store_false", default=True)
    parser.add_argument("--matrix", action="store_true")
    args = parser.parse_args(argv)

    path, tokens, theirs = load(args.folder)
    rms, top1, worst = metrics(theirs[LOGITS_FILES[1]], theirs[LOGITS_FILES[0]])
    print(f"llama.cpp, one token at a time against one batch: rms/std {100 * rms:.3g}%  "
          f"top-1 {top1:.3f}  max {worst:.3g}")

    # The delta-rule options are qwen35moe's only.
    delta = model_class(path).ARCH == "qwen35moe"
    if not args.matrix:
        options = dict(dtype=np.float32 if args.float32 else np.float64, kv_f16=args.kv_f16,
                       emulate_q8=args.emulate_q8_activations)
        if delta:
            options.update(delta_form=args.delta_form, chunk=args.chunk)
        logits, seconds = run(path, tokens, **options)
        report(describe(options), logits, theirs, seconds)
        return

    by_form = {}
    for emulate_q8 in (False, True):
        for form in ("recurrent", "chunked") if delta else (None,):
            options = dict(emulate_q8=emulate_q8, kv_f16=args.kv_f16)
            if delta:
                options.update(delta_form=form, chunk=args.chunk)
            logits, seconds = run(path, tokens, **options)
            by_form[(emulate_q8, form)] = logits
            report(describe(options), logits, theirs, seconds)
    if delta:
        a, b = by_form[(False, "recurrent")], by_form[(False, "chunked")]
        print(f"recurrent against chunked/{args.chunk}, float64 no-q8: max |diff| "
              f"{np.max(np.abs(a - b)):.3g} (logit std {np.std(a):.3g})")


if __name__ == "__main__":
    main()
