"""Reads a routing trace (--trace-routing) from its documented format
(docs/ROUTING_TRACE.md), independently of the engine's reader."""
import struct


def read_trace(trace):
    """{"n_layer", "n_expert", "k", "passes"}: passes are (n_tokens, pos0, layers), layers
    (layer, experts, weights) with token t's j-th choice at index t * k + j."""
    with open(trace, "rb") as f:
        b = f.read()
    assert b[:8] == b"EPQTRACE" and struct.unpack_from("<I", b, 8)[0] == 1
    o = 12
    for _ in range(2):  # architecture, model
        n, = struct.unpack_from("<I", b, o)
        o += 4 + n
    n_layer, n_expert, k = struct.unpack_from("<III", b, o)
    o += 12
    for _ in range(n_layer):
        n, = struct.unpack_from("<I", b, o)
        o += 4 + (24 + 4 * n if n else 0)
    passes = []
    while True:
        tag = b[o]
        o += 1
        if tag == ord("E"):
            assert struct.unpack_from("<QQ", b, o) == (len(passes), sum(len(p[2]) for p in passes))
            assert o + 16 == len(b)
            return {"n_layer": n_layer, "n_expert": n_expert, "k": k, "passes": passes}
        if tag == ord("P"):
            n, pos0 = struct.unpack_from("<Ii", b, o)
            o += 8
            passes.append((n, pos0, []))
        else:
            assert tag == ord("L"), tag
            layer, n = struct.unpack_from("<HI", b, o)
            o += 6
            choices = [struct.unpack_from("<Hf", b, o + 6 * j) for j in range(n * k)]
            o += 6 * n * k
            passes[-1][2].append((layer, [e for e, _ in choices], [w for _, w in choices]))
