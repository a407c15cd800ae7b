#!/usr/bin/python3
"""Run the numpy reference model over a token sequence and write an EPQ logits file.

    run_reference.py MODEL.gguf --tokens 1,2,3,... --logits-out OUT
                     [--emulate-q8-activations] [--no-kv-f16] [--float32]
                     [--delta-form recurrent|chunked] [--chunk N]
                     [--follow-ties OTHER_LOGITS [--tolerance T]] [--report R.json]

The model class is chosen by the file's general.architecture (MODELS below).

Positions 0..N-1 are run as one sequence; logits of positions 0..N-2 are written with
targets tokens[1..N-1], the layout of `epq perplexity --all-positions --logits-out`.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from follow_ties import follow_ties  # noqa: E402
from deepseek2 import DeepSeek2  # noqa: E402
from gguf_reader import GGUFFile  # noqa: E402
from laguna import Laguna  # noqa: E402
from logits_file import read_logits, write_logits  # noqa: E402
from qwen3moe import Qwen3MoE  # noqa: E402
from qwen35moe import Qwen35MoE  # noqa: E402
from xing4_0 import Xing4_0  # noqa: E402

# general.architecture -> reference model class.
MODELS = {Qwen3MoE.ARCH: Qwen3MoE, Qwen35MoE.ARCH: Qwen35MoE, Laguna.ARCH: Laguna,
          DeepSeek2.ARCH: DeepSeek2, Xing4_0.ARCH: Xing4_0}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tokens", required=True, help="comma-separated token ids")
    parser.add_argument("--logits-out", required=True)
    parser.add_argument("--emulate-q8-activations", action="store_true",
                        help="round the input of every quantized-weight product through int8")
    parser.add_argument("--kv-f16", dest="kv_f16", action="store_true", default=True,
                        help="round K and V to float16 as the KV cache does (default)")
    parser.add_argument("--no-kv-f16", dest="kv_f16", action="store_false")
    parser.add_argument("--float32", action="store_true", help="compute in float32, not float64")
    parser.add_argument("--delta-form", choices=("recurrent", "chunked"), default="recurrent",
                        help="qwen35moe: the gated delta rule token by token (default) or "
                        "in chunks")
    parser.add_argument("--chunk", type=int, default=64, help="qwen35moe: chunk size of "
                        "--delta-form chunked (default 64)")
    parser.add_argument("--follow-ties", metavar="LOGITS",
                        help="take near-ties the way the run that wrote this logits file "
                        "did (see follow_ties.py)")
    parser.add_argument("--tolerance", type=float, default=3e-3,
                        help="logit tolerance for --follow-ties (default 3e-3)")
    parser.add_argument("--report", help="write a JSON report here: per-position smallest "
                        "near-tie margin (1: none), the flips --follow-ties took, and why "
                        "it stopped if it did not align every position")
    args = parser.parse_args(argv)

    tokens = [int(t) for t in args.tokens.replace(" ", ",").split(",") if t]
    if len(tokens) < 2:
        parser.error("need at least 2 tokens")
    arch = GGUFFile(args.model).metadata.get("general.architecture")
    if arch not in MODELS:
        parser.error(f"{args.model}: architecture {arch!r} has no reference model "
                     f"(known: {', '.join(sorted(MODELS))})")
    options = {}
    if arch == Qwen35MoE.ARCH:
        options = dict(delta_form=args.delta_form, chunk=args.chunk)
    model = MODELS[arch](args.model, dtype=np.float32 if args.float32 else np.float64,
                         kv_f16=args.kv_f16, emulate_q8=args.emulate_q8_activations, **options)
    if max(tokens) >= model.n_vocab or min(tokens) < 0:
        parser.error(f"token ids must be in [0, {model.n_vocab})")
    flips, problem = [], None
    if args.follow_ties:
        targets, other = read_logits(args.follow_ties)
        if list(targets) != tokens[1:]:
            parser.error(f"{args.follow_ties} does not score these tokens")
        logits, flips, problem = follow_ties(model, tokens, other, args.tolerance)
    else:
        logits = model.forward(tokens)
    write_logits(args.logits_out, tokens[1:], logits[:-1])
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"near_tie_margin": model.choices.per_position(len(tokens)).tolist(),
                       "flips": [{"key": list(key), "value": value, "margin": margin}
                                 for key, value, margin in flips],
                       "problem": problem}, f, indent=1)


if __name__ == "__main__":
    main()
