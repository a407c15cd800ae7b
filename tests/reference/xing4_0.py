"""A numpy reference forward pass for `xing4_0` GGUF models (XingChen-AGI Xing4.0).

Written from the architecture's description (specs/xing4_0.md, on top of
specs/deepseek2.md: llama.cpp's graph), not from the engine's C++ sources. The layer body
is deepseek2's (MLA, dense SwiGLU in the leading `leading_dense_block_count` layers, else
sigmoid + selection-bias routing, normalised and scaled, plus an ungated shared expert);
around each sub-layer (attention, FFN) run 4 hyper-connection streams X[0..3] in place of
the residual:

  f    = rmsnorm(X[0] | X[1] | X[2] | X[3])            (no weight, over all 4E values)
  m    = hc_fn f (24 values); with base (24) and scale (3):
  pre  = sigmoid(m[0:4] scale[0] + base[0:4])
  post = 2 sigmoid(m[4:8] scale[1] + base[4:8])
  L    = clamp(m[8 + 4 dst + src] scale[2] + base[8 + 4 dst + src], -30, 30)
  C    = exp(L - max_src L), then `sinkhorn_iterations` times: divide each destination
         row by (its sum over sources + eps), then each source column by (its sum over
         destinations + eps)
  y    = sublayer(norm(sum_s pre[s] X[s]))
  X'[d] = post[d] y + sum_s C[d][s] X[s]               (no plain residual)

and the output norm reads the mean of the four streams. The trailing
`nextn_predict_layers` blocks (MTP) are not run.

The streams are kept in the model's dtype (float64 by default, float32 with
dtype=np.float32). Options as in deepseek2.py; comb_transposed=True reads comb src-major
(8 + 4 src + dst, DeepSeek-V4's layout): a wrong model, for tests.
"""
import numpy as np

from blocks import rms_norm, sigmoid
from deepseek2 import DeepSeek2

ARCH = "xing4_0"
N_STREAM = 4
COMB_CLAMP = 30.0   # no key: fixed in llama.cpp


def sinkhorn(logits, iterations, eps):
    """logits (..., dst, src) -> C: exp(logits - max over src), then `iterations` times a
    normalisation over sources (each destination row) and then over destinations (each
    source column), eps added to every denominator."""
    c = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    for _ in range(iterations):
        c = c / (np.sum(c, axis=-1, keepdims=True) + eps)
        c = c / (np.sum(c, axis=-2, keepdims=True) + eps)
    return c


class Xing4_0(DeepSeek2):
    """A xing4_0 GGUF file as a numpy model: Xing4_0(path).forward(tokens) -> logits."""

    ARCH = ARCH

    def __init__(self, path, dtype=np.float64, kv_f16=True, emulate_q8=False,
                 comb_transposed=False):
        super().__init__(path, dtype, kv_f16, emulate_q8)
        hp = self.hp
        self.n_nextn = hp("nextn_predict_layers", 0)
        self.n_layer -= self.n_nextn            # the trunk; the MTP block is not run
        self.n_stream = hp("hyper_connection.count")
        if self.n_stream != N_STREAM:
            raise ValueError(f"{path}: hyper_connection.count {self.n_stream}, not {N_STREAM}")
        self.sinkhorn_iterations = hp("hyper_connection.sinkhorn_iterations")
        self.hc_eps = hp("hyper_connection.epsilon")
        self.comb_transposed = comb_transposed
        n_mix = 2 * N_STREAM + N_STREAM * N_STREAM
        for il in range(self.n_layer):
            for kind in ("attn", "ffn"):
                name = f"blk.{il}.hc_{kind}_fn.weight"
                if name not in self.gguf.tensors:
                    raise ValueError(f"{path}: missing {name}")
                dims = tuple(self.gguf.tensors[name].dims)
                if dims != (N_STREAM * self.n_embd, n_mix):
                    raise ValueError(f"{path}: {name} has shape {dims}")

    def hyper_connection(self, layer, kind, X, pos):
        """(pre (n, 4), post (n, 4), comb (n, dst, src)) of blk.<layer>'s `kind` ("attn"
        or "ffn") hyper-connection on the streams X (n, 4, E)."""
        n_tok = X.shape[0]
        pre_ = f"blk.{layer}.hc_{kind}_"
        f = rms_norm(X.reshape(n_tok, -1), self.eps)
        m = self.matmul(pre_ + "fn.weight", f, pre_ + "in", pos)               # (n, 24)
        base = self.weight(pre_ + "base.weight")
        scale = self.weight(pre_ + "scale.weight")
        S = N_STREAM
        pre = sigmoid(m[:, :S] * scale[0] + base[:S])
        post = 2.0 * sigmoid(m[:, S:2 * S] * scale[1] + base[S:2 * S])
        logits = np.clip(m[:, 2 * S:] * scale[2] + base[2 * S:], -COMB_CLAMP, COMB_CLAMP)
        logits = logits.reshape(n_tok, S, S)                                  # [dst][src]
        if self.comb_transposed:
            logits = logits.transpose(0, 2, 1)
        return pre, post, sinkhorn(logits, self.sinkhorn_iterations, self.hc_eps)

    def sublayer(self, layer, kind, X, pos, run):
        """X' = post * run(sub-layer input) + comb X, for one hyper-connected sub-layer."""
        pre, post, comb = self.hyper_connection(layer, kind, X, pos)
        u = np.einsum("ns,nse->ne", pre, X)
        y = run(u)
        return post[:, :, None] * y[:, None, :] + np.einsum("nds,nse->nde", comb, X)

    def block(self, layer, X, pos, cos, sin, past):
        """One layer on the streams X (n, 4, E): (X after the layer, its cache rows)."""
        pre = f"blk.{layer}."
        cache = []

        def attn(u):
            h = rms_norm(u, self.eps) * self.weight(pre + "attn_norm.weight")
            out, rows = self.attention(layer, h, pos, cos, sin, past)
            cache.append(rows)
            return out

        def ffn(u):
            h2 = rms_norm(u, self.eps) * self.weight(pre + "ffn_norm.weight")
            return self.ffn(layer, h2, pos)

        X = self.sublayer(layer, "attn", X, pos, attn)
        X = self.sublayer(layer, "ffn", X, pos, ffn)
        return X, cache[0]

    def stream_in(self, x):
        """Every stream starts as the embedding: (n, E) -> (n, 4, E)."""
        return np.repeat(x[:, None, :], N_STREAM, axis=1)

    def final_hidden(self, X):
        """The plain mean of the streams."""
        return X.mean(axis=1)
