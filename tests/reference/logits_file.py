"""The EPQ logits file (`epq perplexity --logits-out`), read and written with numpy.

Layout (little-endian):
    char[4]  magic "EPQL"
    uint32   version (1)
    uint32   n_vocab
    uint32   n_positions
    int32    targets[n_positions]     the token each scored position predicts
    float32  logits[n_positions][n_vocab]
"""
import struct

import numpy as np

MAGIC = b"EPQL"
VERSION = 1
_HEADER = struct.Struct("<4sIII")


def write_logits(path, targets, logits):
    targets = np.asarray(targets, dtype="<i4").reshape(-1)
    logits = np.asarray(logits, dtype="<f4")
    if logits.ndim != 2 or logits.shape[0] != targets.shape[0]:
        raise ValueError(f"logits {logits.shape} do not match {targets.shape[0]} targets")
    with open(path, "wb") as f:
        f.write(_HEADER.pack(MAGIC, VERSION, logits.shape[1], logits.shape[0]))
        f.write(targets.tobytes())
        f.write(np.ascontiguousarray(logits).tobytes())


def read_logits(path):
    """Returns (targets int32 [n_positions], logits float32 [n_positions, n_vocab])."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _HEADER.size:
        raise ValueError(f"{path}: too short for a logits file")
    magic, version, n_vocab, n_pos = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise ValueError(f"{path}: bad magic {magic!r}")
    if version != VERSION:
        raise ValueError(f"{path}: unsupported version {version}")
    expected = _HEADER.size + 4 * n_pos + 4 * n_pos * n_vocab
    if len(data) != expected:
        raise ValueError(f"{path}: {len(data)} bytes, expected {expected}")
    off = _HEADER.size
    targets = np.frombuffer(data, dtype="<i4", count=n_pos, offset=off)
    logits = np.frombuffer(data, dtype="<f4", count=n_pos * n_vocab, offset=off + 4 * n_pos)
    return targets.copy(), logits.reshape(n_pos, n_vocab).copy()
