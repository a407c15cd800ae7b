"""A numpy reference forward pass for `qwen3moe` GGUF models (llama.cpp's graph).

Written independently of the engine's C++ sources, from the model's public description.
Computation is float64 by default; weights are dequantized once (to float32, then to the
compute dtype) and cached.

Two options emulate what the engine does on purpose, so the comparison can be tight:
  kv_f16      K (after norm and rope) and V are rounded to float16, as the engine's KV
              cache stores them (on by default).
  emulate_q8  the input of every product with a quantized weight is replaced by its int8
              quantize-dequantize round trip, as the engine's integer kernels see it.

Both are roundings, and a rounding is a discrete choice: where a value lies within float
noise of a midpoint, the engine's float32 arithmetic may round it the other way, and the
±1 step that follows can grow through later roundings into a visible difference. The same
holds for the K-th routed expert when two router logits nearly tie. `Choices` records
every such near-tie of a forward pass and can take chosen ones the other way; see
follow_ties.py for why that is useful.
"""
import math

import numpy as np

import dequant
from gguf_reader import GGUFFile

ARCH = "qwen3moe"

# Weight types whose products read int8 activations, and the activation block size.
_Q8_BLOCK_32 = {dequant.Q4_0, dequant.Q4_1, dequant.Q5_0, dequant.Q5_1, dequant.Q8_0,
                dequant.IQ4_NL, dequant.MXFP4}
_Q8_BLOCK_256 = {dequant.Q2_K, dequant.Q3_K, dequant.Q4_K, dequant.Q5_K, dequant.Q6_K,
                 dequant.Q8_K, dequant.IQ4_XS}

# Lower bound of the sum of the selected experts' probabilities (llama.cpp's clamp).
_MIN_WEIGHT_SUM = 6.103515625e-5


def activation_block(weight_type):
    """The int8 activation block size a weight type's kernel reads (0: float input)."""
    if weight_type in _Q8_BLOCK_32:
        return 32
    if weight_type in _Q8_BLOCK_256:
        return 256
    return 0


def rms_norm(x, eps):
    """x / sqrt(mean(x^2) + eps) over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def softmax(z, axis=-1):
    z = z - np.max(z, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def silu(z):
    return z / (1.0 + np.exp(-z))


class Qwen3MoE:
    """A qwen3moe GGUF file as a numpy model: Qwen3MoE(path).forward(tokens) -> logits."""

    def __init__(self, path, dtype=np.float64, kv_f16=True, emulate_q8=False):
        self.gguf = GGUFFile(path)
        self.dtype = dtype
        self.kv_f16 = kv_f16
        self.emulate_q8 = emulate_q8
        self._weights = {}
        self.choices = Choices()

        md = self.gguf.metadata
        if md.get("general.architecture") != ARCH:
            raise ValueError(f"{path}: architecture {md.get('general.architecture')!r}, not {ARCH}")

        def hp(key, default=None):
            value = md.get(f"{ARCH}.{key}", default)
            if value is None:
                raise ValueError(f"{path}: missing {ARCH}.{key}")
            return value

        self.n_embd = hp("embedding_length")
        self.n_layer = hp("block_count")
        self.n_head = hp("attention.head_count")
        self.n_head_kv = hp("attention.head_count_kv")
        self.head_dim = hp("attention.key_length")
        self.n_rot = hp("rope.dimension_count", self.head_dim)
        self.n_expert = hp("expert_count")
        self.n_expert_used = hp("expert_used_count")
        self.eps = hp("attention.layer_norm_rms_epsilon")
        self.rope_base = hp("rope.freq_base")
        self.n_vocab = len(md["tokenizer.ggml.tokens"])

        self.yarn = md.get(f"{ARCH}.rope.scaling.type") == "yarn"
        if self.yarn:
            self.yarn_factor = hp("rope.scaling.factor")
            self.yarn_orig_ctx = hp("rope.scaling.original_context_length")

        # Without output.weight the lm head is the token embedding (tied).
        tied = "output.weight" not in self.gguf.tensors
        self.output_name = "token_embd.weight" if tied else "output.weight"

    # ---- weights ----

    def weight(self, name):
        """A tensor as an array in the compute dtype, dims reversed (row-major):
        [in, out] -> (out, in); [in, out, n_expert] -> (n_expert, out, in)."""
        if name not in self._weights:
            info = self.gguf.tensors[name]
            values = dequant.dequantize(self.gguf.tensor_bytes(name), info.type, info.n_elements)
            self._weights[name] = values.reshape(tuple(reversed(info.dims))).astype(self.dtype)
        return self._weights[name]

    def matmul(self, name, x, site, positions, expert=None):
        """y = W x for each row of x (x: (n_rows, in)), with W the named weight (or the
        slice `expert` of a 3-D expert tensor). `site` names the activation vector x and
        `positions` the token position of each row (for emulate_q8's record)."""
        w = self.weight(name)
        if expert is not None:
            w = w[expert]
        if self.emulate_q8:
            block = activation_block(self.gguf.tensors[name].type)
            if block:
                x = self.choices.q8_round_trip(x, block, site, positions).astype(self.dtype)
        return x @ w.T

    # ---- rope ----

    def rope_cos_sin(self, positions):
        """cos and sin tables, shape (n_positions, n_rot/2), for NEOX-layout rope."""
        half = self.n_rot // 2
        i = np.arange(half, dtype=np.float64)
        p = np.asarray(positions, dtype=np.float64)[:, None]
        theta_extrap = p * self.rope_base ** (-2.0 * i / self.n_rot)
        if not self.yarn:
            return np.cos(theta_extrap), np.sin(theta_extrap)

        # YaRN as ggml applies it: ext_factor 1, beta_fast 32, beta_slow 1.
        freq_scale = 1.0 / self.yarn_factor
        ext_factor, beta_fast, beta_slow = 1.0, 32.0, 1.0

        def corr_dim(n_rotations):
            return (self.n_rot * math.log(self.yarn_orig_ctx / (n_rotations * 2 * math.pi))
                    / (2 * math.log(self.rope_base)))

        low = max(0.0, math.floor(corr_dim(beta_fast)))
        high = min(self.n_rot - 1.0, math.ceil(corr_dim(beta_slow)))
        ramp = 1.0 - np.clip((i - low) / max(0.001, high - low), 0.0, 1.0)
        mix = ramp * ext_factor
        theta_interp = freq_scale * theta_extrap
        theta = theta_interp * (1 - mix) + theta_extrap * mix
        mscale = 1.0 + 0.1 * math.log(1.0 / freq_scale)
        return np.cos(theta) * mscale, np.sin(theta) * mscale

    def apply_rope(self, x, cos, sin):
        """x: (n_tokens, n_heads, head_dim). Element i pairs with i + n_rot/2."""
        half = self.n_rot // 2
        x0 = x[..., :half]
        x1 = x[..., half:self.n_rot]
        c = cos[:, None, :]
        s = sin[:, None, :]
        out = x.copy()
        out[..., :half] = x0 * c - x1 * s
        out[..., half:self.n_rot] = x0 * s + x1 * c
        return out

    # ---- the graph ----

    def attention(self, layer, x, pos, cos, sin, past_k, past_v):
        """x: the rows of positions `pos` (consecutive); past_k/past_v: the cached K/V
        of the positions before them. Returns (output, k, v), k/v including the past."""
        n_tok = x.shape[0]
        H, Hkv, D = self.n_head, self.n_head_kv, self.head_dim
        pre = f"blk.{layer}."

        h = rms_norm(x, self.eps) * self.weight(pre + "attn_norm.weight")
        q = self.matmul(pre + "attn_q.weight", h, pre + "attn_in", pos).reshape(n_tok, H, D)
        k = self.matmul(pre + "attn_k.weight", h, pre + "attn_in", pos).reshape(n_tok, Hkv, D)
        v = self.matmul(pre + "attn_v.weight", h, pre + "attn_in", pos).reshape(n_tok, Hkv, D)

        q = rms_norm(q, self.eps) * self.weight(pre + "attn_q_norm.weight")
        k = rms_norm(k, self.eps) * self.weight(pre + "attn_k_norm.weight")
        q = self.apply_rope(q, cos, sin)
        k = self.apply_rope(k, cos, sin)

        if self.kv_f16:  # the KV cache holds float16
            k = self.choices.f16_round_trip(k, "k", layer, pos)
            v = self.choices.f16_round_trip(v, "v", layer, pos)
        k = np.concatenate([past_k, k])
        v = np.concatenate([past_v, v])

        group = H // Hkv
        causal = np.arange(len(k))[None, :] <= pos[:, None]     # (query, key)
        heads = np.empty((n_tok, H, D), dtype=self.dtype)
        for head in range(H):
            kv = head // group
            scores = (q[:, head, :] @ k[:, kv, :].T) / math.sqrt(D)
            scores = np.where(causal, scores, -np.inf)
            heads[:, head, :] = softmax(scores, axis=1) @ v[:, kv, :]

        out = self.matmul(pre + "attn_output.weight", heads.reshape(n_tok, H * D),
                          pre + "attn_out", pos)
        return out, k, v

    def moe(self, layer, x, pos):
        pre = f"blk.{layer}."
        K = self.n_expert_used
        h = rms_norm(x, self.eps) * self.weight(pre + "ffn_norm.weight")
        router = self.matmul(pre + "ffn_gate_inp.weight", h, pre + "ffn_in", pos)   # (n_tok, NE)
        probs = softmax(router, axis=1)

        # The K most probable experts, descending; their weights renormalized.
        selected = self.choices.route(probs, router, K, layer, pos)        # (n_tok, K)
        weights = np.take_along_axis(probs, selected, axis=1)
        weights = weights / np.maximum(weights.sum(axis=1, keepdims=True), _MIN_WEIGHT_SUM)

        # Each expert runs on the tokens that chose it; slot k holds the k-th choice.
        expert_out = np.zeros((x.shape[0], K, x.shape[1]), dtype=self.dtype)
        for e in range(self.n_expert):
            rows, slot = np.nonzero(selected == e)
            if len(rows) == 0:
                continue
            p = pos[rows]
            gate = self.matmul(pre + "ffn_gate_exps.weight", h[rows], pre + "ffn_in", p, e)
            up = self.matmul(pre + "ffn_up_exps.weight", h[rows], pre + "ffn_in", p, e)
            expert_out[rows, slot] = self.matmul(pre + "ffn_down_exps.weight", silu(gate) * up,
                                                 f"{pre}ffn_down.{e}", p, e)

        # The weighted sum in selection order.
        out = np.zeros_like(x)
        for k in range(K):
            out += weights[:, k:k + 1] * expert_out[:, k]
        return out

    def forward(self, tokens, take=None, resume=None):
        """Logits (n_tokens, n_vocab) for tokens at positions 0..n_tokens-1.

        take: {key: value} choices to take at near-ties (see Choices). Afterwards
        self.choices holds the near-ties this pass met, and self.trace the residual
        stream entering each layer (and leaving the last) and each layer's K/V cache.
        resume: (trace, layer, position), the trace of an earlier full pass over the tokens
        that made the same choices before `position` and below `layer`: it supplies
        those, and only positions from `position` on, layers from `layer` on, are
        computed (their logits returned; near-ties are recorded for them only)."""
        self.choices = Choices(take)
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        first_layer, start = 0, 0
        if resume:
            trace, first_layer, start = resume
        pos = np.arange(start, n)
        cos, sin = self.rope_cos_sin(pos)
        empty = np.zeros((0, self.n_head_kv, self.head_dim), dtype=self.dtype)

        if resume:
            x = trace["x"][first_layer][start:n].copy()
        else:
            x = self.weight("token_embd.weight")[tokens].copy()   # (n_tok, E)
        self.trace = {"x": [None] * (self.n_layer + 1), "k": [None] * self.n_layer,
                      "v": [None] * self.n_layer}
        for layer in range(first_layer, self.n_layer):
            self.trace["x"][layer] = x
            past_k = trace["k"][layer][:start] if resume else empty
            past_v = trace["v"][layer][:start] if resume else empty
            out, self.trace["k"][layer], self.trace["v"][layer] = self.attention(
                layer, x, pos, cos, sin, past_k, past_v)
            x = x + out
            x = x + self.moe(layer, x, pos)
        self.trace["x"][self.n_layer] = x

        h = rms_norm(x, self.eps) * self.weight("output_norm.weight")
        return self.matmul(self.output_name, h, "output_in", pos)[:, :self.n_vocab]


class Choices:
    """The near-ties of one forward pass, and the choices to take at some of them.

    A choice is named by a key:
      ("q8", site, block, position, element)    int8 rounding of an activation element;
                                                 site names the activation vector (the
                                                 engine quantizes each vector once for all
                                                 the matrices that read it); value: q
      ("f16", "k" or "v", layer, position, head, dim)   float16 rounding of a K/V
                                                 element; value: the float16 value
      ("route", layer, position)                 the K-th routed expert; value: its index
    `found` maps the key of every near-tie to (margin, other): its margin in units of the
    threshold (below 1: within reach of float noise) and the value the other way.
    `take` maps keys to the value to take there; a value is taken only while it is
    still one of the two candidates, so a choice stays put when an earlier change has
    moved the value away from that midpoint. The thresholds are generous multiples of the
    engine's float32 noise."""

    # Flips that explained real engine runs had margins up to ~5e-4 q, ~3e-7 rms and
    # (none seen) for routing; the thresholds leave room above that.
    Q8_THRESHOLD = 2e-3     # distance to the rounding midpoint, in units of q
    F16_THRESHOLD = 2e-6    # distance to the midpoint, relative to the head's rms
    ROUTE_THRESHOLD = 1e-4  # gap between the K-th and (K+1)-th router logits

    def __init__(self, take=None):
        self.take = dict(take or {})
        self.found = {}

    def _note(self, key, where, margin, threshold, other):
        """Records the near-ties among entries: key is the fixed part of their keys,
        `where` the index arrays (shaped like margin) that complete each key."""
        near = margin < threshold
        columns = [np.asarray(w)[near].tolist() for w in where]
        for *rest, m, o in zip(*columns, (margin[near] / threshold).tolist(),
                               np.asarray(other)[near].tolist()):
            self.found[key + tuple(rest)] = (m, o)

    def _taken(self, key, where):
        """(mask, values) of the entries with a value in `take`."""
        mask = np.zeros(np.shape(where[0]), dtype=bool)
        values = np.zeros(np.shape(where[0]))
        for full, value in self.take.items():
            if full[:len(key)] == key:
                hit = np.logical_and.reduce([w == v for w, v in zip(where, full[len(key):])])
                mask |= hit
                values[hit] = value
        return mask, values

    def q8_round_trip(self, x, block, site, positions):
        """Quantize-dequantize rows of x (one row per position) to int8 in blocks of
        `block`, in float32 arithmetic: d = amax/127, q = rint(x * 127/amax) (half to
        even), x' = d*q."""
        x32 = np.asarray(x, dtype=np.float32)
        rows, n = x32.shape
        b = x32.reshape(rows, n // block, block)
        amax = np.max(np.abs(b), axis=2, keepdims=True)
        d = amax / np.float32(127)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = np.where(amax == 0, np.float32(0), np.float32(127) / amax).astype(np.float32)
            exact = np.asarray(x, dtype=np.float64).reshape(b.shape) * (127.0 / amax)
        exact = np.where(amax == 0, 0.0, exact).reshape(rows, n)
        q = np.rint(b * inv).reshape(rows, n)   # float32 product, then round half to even

        margin = np.abs(np.abs(exact - np.floor(exact)) - 0.5)
        where = [np.broadcast_to(np.asarray(positions)[:, None], (rows, n)),
                 np.broadcast_to(np.arange(n)[None, :], (rows, n))]
        self._note(("q8", site, block), where, margin, self.Q8_THRESHOLD,
                   q - np.sign(q - exact))
        mask, values = self._taken(("q8", site, block), where)
        q = np.where(mask & (np.abs(values - exact) < 1), values, q).astype(np.float32)
        return (d * q.reshape(b.shape)).astype(np.float32).reshape(rows, n)

    def f16_round_trip(self, x, name, layer, positions):
        """Round x (n_tokens, n_heads, head_dim) to float16 (nearest, ties to even)."""
        x64 = np.asarray(x, dtype=np.float64)
        rounded = x64.astype(np.float16).astype(np.float64)
        toward = np.where(rounded > x64, -np.inf, np.inf)
        other = np.nextafter(rounded.astype(np.float16), toward.astype(np.float16))
        other = other.astype(np.float64)                 # the float16 across x
        # Float noise in an element scales with its vector (cancellation makes small
        # elements no more precise), so the margin is measured against the head's rms.
        scale = np.sqrt(np.mean(x64 * x64, axis=2, keepdims=True))
        with np.errstate(divide="ignore", invalid="ignore"):
            margin = np.abs(x64 - (rounded + other) / 2) / scale
        margin = np.where(np.isfinite(margin), margin, 1.0)
        _, head, dim = np.indices(x.shape)
        where = [np.broadcast_to(np.asarray(positions)[:, None, None], x.shape), head, dim]
        self._note(("f16", name, layer), where, margin, self.F16_THRESHOLD, other)
        mask, values = self._taken(("f16", name, layer), where)
        out = np.where(mask & ((values == rounded) | (values == other)), values, rounded)
        return out.astype(x.dtype)

    def route(self, probs, router, k, layer, positions):
        """The k most probable experts per row (descending; ties to the lower index).
        Near-ties are measured on the router logits, which order them the same way."""
        ranked = np.argsort(-probs, axis=1, kind="stable")
        if k < router.shape[1]:
            last = np.take_along_axis(router, ranked[:, k - 1:k + 1], axis=1)
            where = [np.asarray(positions)]
            self._note(("route", layer), where, last[:, 0] - last[:, 1],
                       self.ROUTE_THRESHOLD, ranked[:, k])
            mask, values = self._taken(("route", layer), where)
            swap = mask & (values == ranked[:, k])
            ranked[swap, k - 1], ranked[swap, k] = ranked[swap, k], ranked[swap, k - 1]
        return ranked[:, :k]

    def per_position(self, n_positions):
        """The smallest margin per position over every kind (1: nothing near)."""
        out = np.ones(n_positions)
        for key, (margin, _) in self.found.items():
            pos = key[2] if key[0] == "route" else key[3]
            out[pos] = min(out[pos], margin)
        return out
