"""What the architecture tests share: llama.cpp's reference data in tests/data/llamacpp/<arch>
(64 token ids, llama.cpp's logits for them in one batch and one token at a time), the
engine's logits at every position, and the band that separates rounding from bugs
(rms difference / std of the reference's logits, and top-1 agreement).
"""
import os
import struct

import numpy as np

from harness import path, run

LLAMACPP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "llamacpp")


def reference(arch, name):
    """The path of a file of llama.cpp's reference data for arch."""
    return os.path.join(LLAMACPP, arch, name)


def read_ids(file_path):
    with open(file_path, "rb") as f:
        data = f.read()
    return list(struct.unpack(f"<{len(data) // 4}i", data))


def llamacpp_logits(arch, name):
    values = np.fromfile(reference(arch, name), dtype="<f4")
    return values.reshape(64, -1).astype(np.float64)


def engine_logits(model, out, *args, tokens=None, text=None):
    """The engine's logits at every position but the last (perplexity --all-positions)."""
    if tokens is not None:
        source = ["--token-file", tokens]
    else:
        text_path = path("text.txt")
        with open(text_path, "w") as f:
            f.write(text)
        source = ["-f", text_path]
    run("perplexity", "-m", model, *source, "--all-positions", "--logits-out", out, "-t", "2", *args)
    return out


def band(mine, theirs):
    """(rms difference / std of theirs, top-1 agreement) over the positions mine has."""
    theirs = theirs[:len(mine)]
    diff = mine - theirs
    return float(np.sqrt(np.mean(diff * diff)) / np.std(theirs)), float(np.mean(mine.argmax(1) == theirs.argmax(1)))
