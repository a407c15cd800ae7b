"""Blocks shared by the numpy reference models (qwen3moe.py, qwen35moe.py, laguna.py,
deepseek2.py, xing4_0.py).

A model is a GGUFModel: it reads its file, dequantizes weights on first use and caches
them in the compute dtype, and multiplies through matmul(), which applies the engine's
activation rounding when emulate_q8 is on. The functions below are the pieces the
graphs use in the same way: norms, rope (NEOX or NORM pairing, optionally partial,
optionally YaRN), causal grouped-query attention (optionally over a sliding window, with
its own scale and value width), the float16 KV cache, top-k routing (softmax or sigmoid
scores, optionally a selection-only bias, group-limited selection, a renormalisation and
a scale) and the SwiGLU expert FFN. `Choices` records the near-ties of the
roundings and routing of one forward pass (see follow_ties.py).
"""
import math

import numpy as np

import dequant
from gguf_reader import GGUFFile

# Weight types whose products read int8 activations, and the activation block size.
# Float weights (F32, F16, BF16) read float32 activations: the engine's rule
# (src/quant/activation.cpp, activation_format). llama.cpp instead rounds the
# activation to F16/BF16 for those; see GGUFModel's f16_act.
_Q8_BLOCK_32 = {dequant.Q4_0, dequant.Q4_1, dequant.Q5_0, dequant.Q5_1, dequant.Q8_0,
                dequant.IQ4_NL, dequant.MXFP4}
_Q8_BLOCK_256 = {dequant.Q2_K, dequant.Q3_K, dequant.Q4_K, dequant.Q5_K, dequant.Q6_K,
                 dequant.Q8_K, dequant.IQ4_XS}

# Lower bound of the sum of the selected experts' probabilities (llama.cpp's clamp).
MIN_WEIGHT_SUM = 6.103515625e-5


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


def l2_norm(x, eps):
    """x / max(||x||_2, eps) over the last axis (ggml's l2_norm)."""
    return x / np.maximum(np.sqrt(np.sum(x * x, axis=-1, keepdims=True)), eps)


def softmax(z, axis=-1):
    z = z - np.max(z, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def silu(z):
    return z / (1.0 + np.exp(-z))


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def softplus(z):
    """ggml's softplus: z above 20 passes through, else log(1 + e^z)."""
    return np.where(z > 20, z, np.log1p(np.exp(np.minimum(z, 20))))


# ---- rope ----

def rope_cos_sin(positions, n_rot, base, yarn=None, attn_factor=1.0):
    """cos and sin tables, shape (n_positions, n_rot/2), for NEOX-layout rope.
    yarn: None, or (factor, original context length) for YaRN as ggml applies it; then
    cos and sin are scaled by attn_factor * (1 + 0.1 ln factor) (ggml's mscale with
    llama.cpp's context: rope.scaling.attn_factor times YaRN's own magnitude)."""
    half = n_rot // 2
    i = np.arange(half, dtype=np.float64)
    p = np.asarray(positions, dtype=np.float64)[:, None]
    theta_extrap = p * base ** (-2.0 * i / n_rot)
    if yarn is None:
        return np.cos(theta_extrap), np.sin(theta_extrap)

    # YaRN as ggml applies it: ext_factor 1, beta_fast 32, beta_slow 1.
    factor, orig_ctx = yarn
    freq_scale = 1.0 / factor
    ext_factor, beta_fast, beta_slow = 1.0, 32.0, 1.0

    def corr_dim(n_rotations):
        return (n_rot * math.log(orig_ctx / (n_rotations * 2 * math.pi))
                / (2 * math.log(base)))

    low = max(0.0, math.floor(corr_dim(beta_fast)))
    high = min(n_rot - 1.0, math.ceil(corr_dim(beta_slow)))
    ramp = 1.0 - np.clip((i - low) / max(0.001, high - low), 0.0, 1.0)
    mix = ramp * ext_factor
    theta_interp = freq_scale * theta_extrap
    theta = theta_interp * (1 - mix) + theta_extrap * mix
    mscale = attn_factor * (1.0 + 0.1 * math.log(1.0 / freq_scale))
    return np.cos(theta) * mscale, np.sin(theta) * mscale


def apply_rope(x, cos, sin, n_rot):
    """NEOX pairing. x: (n_tokens, n_heads, head_dim). Element i < n_rot/2 pairs with
    i + n_rot/2; elements from n_rot on pass through."""
    half = n_rot // 2
    x0 = x[..., :half]
    x1 = x[..., half:n_rot]
    c = cos[:, None, :]
    s = sin[:, None, :]
    out = x.copy()
    out[..., :half] = x0 * c - x1 * s
    out[..., half:n_rot] = x0 * s + x1 * c
    return out


def apply_rope_norm(x, cos, sin, n_rot):
    """NORM pairing (llama.cpp's LLAMA_ROPE_TYPE_NORM, ggml mode 0): x (n_tokens,
    n_heads, head_dim); elements 2i and 2i+1 (i < n_rot/2) rotate by angle i (cos[:, i],
    sin[:, i] from rope_cos_sin); elements from n_rot on pass through."""
    x0 = x[..., 0:n_rot:2]
    x1 = x[..., 1:n_rot:2]
    c = cos[:, None, :]
    s = sin[:, None, :]
    out = x.copy()
    out[..., 0:n_rot:2] = x0 * c - x1 * s
    out[..., 1:n_rot:2] = x0 * s + x1 * c
    return out


# ---- attention ----

def causal_attention(q, k, v, pos, dtype, window=None, scale=None):
    """Softmax attention of queries q (n_tok, H, D) at positions `pos` over keys k
    (n_ctx, Hkv, D) and values v (n_ctx, Hkv, Dv) at positions 0..n_ctx-1, scale
    1/sqrt(D) unless given. Query head h reads kv head h / (H / Hkv). window: None (every
    earlier key), or n: the query at position i sees the keys j with i - n < j <= i
    (itself and the n-1 before it). Returns (n_tok, H, Dv)."""
    n_tok, H, D = q.shape
    if H % k.shape[1]:
        raise ValueError(f"{H} query heads do not group over {k.shape[1]} kv heads")
    group = H // k.shape[1]
    keys = np.arange(len(k))[None, :]
    causal = keys <= pos[:, None]     # (query, key)
    if window is not None:
        causal &= pos[:, None] - keys < window
    heads = np.empty((n_tok, H, v.shape[2]), dtype=dtype)
    for head in range(H):
        kv = head // group
        scores = q[:, head, :] @ k[:, kv, :].T
        scores = scores / math.sqrt(D) if scale is None else scores * scale
        scores = np.where(causal, scores, -np.inf)
        heads[:, head, :] = softmax(scores, axis=1) @ v[:, kv, :]
    return heads


class GGUFModel:
    """The file, the weights and the products of one architecture's reference model.

    Options (what the engine does on purpose, so that comparisons can be tight):
      kv_f16      K and V are rounded to float16 as the engine's KV cache stores them.
      emulate_q8  the input of every product is rounded as the engine's kernels see it
                  (and as llama.cpp's do): for a quantized weight its int8
                  quantize-dequantize round trip (blocks of 32, or 256 for the
                  K-quants); for an F16 (BF16) weight float16 (bfloat16); F32 weights
                  read float32.
    """

    ARCH = None

    def __init__(self, path, dtype=np.float64, kv_f16=True, emulate_q8=False):
        self.gguf = GGUFFile(path)
        self.path = path
        self.dtype = dtype
        self.kv_f16 = kv_f16
        self.emulate_q8 = emulate_q8
        self._weights = {}
        self.choices = Choices()
        md = self.gguf.metadata
        if md.get("general.architecture") != self.ARCH:
            raise ValueError(f"{path}: architecture {md.get('general.architecture')!r}, "
                             f"not {self.ARCH}")
        self.n_vocab = len(md["tokenizer.ggml.tokens"])

    def hp(self, key, default=None):
        """The metadata value ARCH.key; default if absent; an error if both are absent."""
        value = self.gguf.metadata.get(f"{self.ARCH}.{key}", default)
        if value is None:
            raise ValueError(f"{self.path}: missing {self.ARCH}.{key}")
        return value

    def begin_pass(self, tokens, take, resume):
        """The common start of forward(tokens, take, resume): (trace or None, first layer,
        first position, positions, the residual stream entering the first layer)."""
        self.choices = Choices(take)
        tokens = np.asarray(tokens, dtype=np.int64)
        trace, first_layer, start = resume if resume else (None, 0, 0)
        pos = np.arange(start, len(tokens))
        if resume:
            x = trace["x"][first_layer][start:len(tokens)].copy()
        else:
            x = self.weight("token_embd.weight")[tokens].copy()   # (n_tok, E)
        return trace, first_layer, start, pos, x

    def weight(self, name):
        """A tensor as an array in the compute dtype, dims reversed (row-major):
        [in, out] -> (out, in); [in, out, n_expert] -> (n_expert, out, in)."""
        if name not in self._weights:
            info = self.gguf.tensors[name]
            values = dequant.dequantize(self.gguf.tensor_bytes(name), info.type, info.n_elements)
            self._weights[name] = values.reshape(tuple(reversed(info.dims))).astype(self.dtype)
        return self._weights[name]

    def matmul(self, name, x, site, positions, expert=None, rows=None):
        """y = W x for each row of x (x: (n_rows, in)), with W the named weight (or the
        slice `expert` of a 3-D expert tensor, and of it the output rows `rows`, a
        slice). `site` names the activation vector x and `positions` the token position
        of each row (for emulate_q8's record)."""
        w = self.weight(name)
        if expert is not None:
            w = w[expert]
        if rows is not None:
            w = w[rows]
        ttype = self.gguf.tensors[name].type
        if self.emulate_q8:
            block = activation_block(ttype)
            if block:
                x = self.choices.q8_round_trip(x, block, site, positions).astype(self.dtype)
        if self.emulate_q8 and ttype in (dequant.F16, dequant.BF16):
            x = self.choices.f16_round_trip(x[:, None, :], site, "input", positions,
                                            bf16=ttype == dequant.BF16)[:, 0, :].astype(self.dtype)
        return x @ w.T

    def cache_kv(self, k, v, layer, pos, past_k, past_v):
        """K and V of positions `pos` (rounded to float16 if kv_f16) appended to the past."""
        if self.kv_f16:  # the KV cache holds float16
            k = self.choices.f16_round_trip(k, "k", layer, pos)
            v = self.choices.f16_round_trip(v, "v", layer, pos)
        return np.concatenate([past_k, k]), np.concatenate([past_v, v])

    def routed_moe(self, layer, h, pos, gating="softmax", selection_bias=None, norm=True,
                   scale=None, groups=None):
        """The routed experts of blk.<layer> on the normed rows h: scores over all
        experts (softmax, or a sigmoid per expert, of the router's logits), the top
        n_expert_used of the scores (plus the tensor `selection_bias`, if named: it
        enters the selection only; groups=(G, used) with G > 1: only experts of the
        `used` groups of highest score count, a group being NX/G consecutive experts and
        its score the sum of its two highest selection scores, as llama.cpp's
        build_moe_ffn), their unbiased scores as weights, renormalised
        (if norm; the sum clamped below at MIN_WEIGHT_SUM), times `scale` (if given);
        each expert silu(gate h) * (up h) -> down; the outputs summed in selection
        order. Gate and up come from ffn_gate_exps/ffn_up_exps, or from a fused
        ffn_gate_up_exps (gate the first n_ff rows of each expert, up the rest)."""
        pre = f"blk.{layer}."
        K = self.n_expert_used
        router = self.matmul(pre + "ffn_gate_inp.weight", h, pre + "ffn_in", pos)   # (n_tok, NE)
        if gating == "softmax":
            probs = softmax(router, axis=1)
        elif gating == "sigmoid":
            probs = sigmoid(router)
        else:
            raise ValueError(f"gating {gating!r}: softmax or sigmoid")

        # The K best experts, descending. Without a bias the router logits order them as
        # the scores do (and measure their near-ties); with one, the biased scores do.
        grouped = groups is not None and groups[0] > 1
        if selection_bias is None and not grouped:
            selected = self.choices.route(probs, router, K, layer, pos)    # (n_tok, K)
        else:
            biased = probs if selection_bias is None else probs + self.weight(selection_bias)
            if grouped:
                biased = limit_to_groups(biased, groups[0], groups[1], K)
            selected = self.choices.route(biased, biased, K, layer, pos)
        weights = np.take_along_axis(probs, selected, axis=1)
        if norm:
            weights = weights / np.maximum(weights.sum(axis=1, keepdims=True), MIN_WEIGHT_SUM)
        if scale is not None:
            weights = weights * scale

        fused = pre + "ffn_gate_up_exps.weight"
        if fused in self.gguf.tensors:
            n_ff = self.gguf.tensors[fused].dims[1] // 2
            gate_w, gate_rows = fused, slice(0, n_ff)
            up_w, up_rows = fused, slice(n_ff, 2 * n_ff)
        else:
            gate_w, gate_rows = pre + "ffn_gate_exps.weight", None
            up_w, up_rows = pre + "ffn_up_exps.weight", None

        # Each expert runs on the tokens that chose it; slot k holds the k-th choice.
        expert_out = np.zeros((h.shape[0], K, h.shape[1]), dtype=self.dtype)
        for e in range(self.n_expert):
            rows, slot = np.nonzero(selected == e)
            if len(rows) == 0:
                continue
            p = pos[rows]
            gate = self.matmul(gate_w, h[rows], pre + "ffn_in", p, e, gate_rows)
            up = self.matmul(up_w, h[rows], pre + "ffn_in", p, e, up_rows)
            expert_out[rows, slot] = self.matmul(pre + "ffn_down_exps.weight", silu(gate) * up,
                                                 f"{pre}ffn_down.{e}", p, e)

        # The weighted sum in selection order.
        out = np.zeros_like(h)
        for k in range(K):
            out += weights[:, k:k + 1] * expert_out[:, k]
        return out

    def swiglu_ffn(self, layer, suffix, h, pos):
        """down(silu(gate h) * up h) with blk.<layer>.ffn_{gate,up,down}<suffix>.weight."""
        pre = f"blk.{layer}."
        gate = self.matmul(f"{pre}ffn_gate{suffix}.weight", h, pre + "ffn_in", pos)
        up = self.matmul(f"{pre}ffn_up{suffix}.weight", h, pre + "ffn_in", pos)
        return self.matmul(f"{pre}ffn_down{suffix}.weight", silu(gate) * up,
                           f"{pre}ffn_down{suffix}", pos)


def limit_to_groups(scores, n_group, n_used, k):
    """scores (n_tok, NX) with the experts outside each row's n_used best groups set to
    -inf. Groups are NX/n_group consecutive experts; a group's score is the sum of its
    two highest scores (its one score if a group has one expert); ties to the lower
    group."""
    n_tok, n_expert = scores.shape
    size = n_expert // n_group
    if n_expert % n_group or size * n_used < k:
        raise ValueError(f"{n_expert} experts in {n_group} groups, {n_used} used, "
                         f"cannot pick {k}")
    by_group = np.sort(scores.reshape(n_tok, n_group, size), axis=2)
    group_score = by_group[:, :, -min(2, size):].sum(axis=2)       # (n_tok, G)
    kept = np.argsort(-group_score, axis=1, kind="stable")[:, :n_used]
    keep = np.zeros((n_tok, n_group), dtype=bool)
    np.put_along_axis(keep, kept, True, axis=1)
    return np.where(np.repeat(keep, size, axis=1), scores, -np.inf)


def round_float(x, ttype):
    """x rounded to float16 (ttype F16) or bfloat16 (BF16), nearest, ties to even."""
    x32 = np.asarray(x, dtype=np.float32)
    if ttype == dequant.F16:
        return x32.astype(np.float16).astype(np.float32)
    bits = x32.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


class Choices:
    """The near-ties of one forward pass, and the choices to take at some of them.

    A choice is named by a key:
      ("q8", site, block, position, element)    int8 rounding of an activation element;
                                                 site names the activation vector (the
                                                 engine quantizes each vector once for all
                                                 the matrices that read it); value: q
      ("f16", "k" or "v", layer, position, head, dim)   float16 rounding of a K/V
                                                 element; value: the float16 value
      ("f16" or "bf16", site, "input", position, 0, element)   rounding of the input of
                                                 an F16 (BF16) weight product
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
    ROUTE_THRESHOLD = 1e-4  # gap between the K-th and (K+1)-th router logits (scores)

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

    def f16_round_trip(self, x, name, layer, positions, bf16=False):
        """Round x (n_tokens, n_heads, head_dim) to float16, or bfloat16 (nearest, ties to
        even), noting the elements within float noise of a rounding midpoint."""
        x64 = np.asarray(x, dtype=np.float64)
        if bf16:
            rounded = round_float(x64, dequant.BF16).astype(np.float64)
            _, exponent = np.frexp(rounded)
            ulp = np.ldexp(1.0, exponent - 8)                   # bfloat16 keeps 8 significant bits
            other = rounded - np.sign(rounded - x64) * ulp     # the bfloat16 across x
        else:
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
        key = ("bf16" if bf16 else "f16", name, layer)
        self._note(key, where, margin, self.F16_THRESHOLD, other)
        mask, values = self._taken(key, where)
        out = np.where(mask & ((values == rounded) | (values == other)), values, rounded)
        return out.astype(x.dtype)

    def route(self, probs, router, k, layer, positions):
        """The k experts of highest `probs` per row (descending; ties to the lower
        index). Near-ties are measured on `router`: the router logits, which order them
        the same way, or (with a selection bias) the biased scores themselves."""
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
