"""A numpy reference forward pass for `qwen3moe` GGUF models (llama.cpp's graph).

Written independently of the engine's C++ sources, from the model's public description.
Computation is float64 by default; weights are dequantized once (to float32, then to the
compute dtype) and cached.

Two options emulate what the engine does on purpose, so the comparison can be tight:
  kv_f16      K (after norm and rope) and V are rounded to float16, as the engine's KV
              cache stores them (on by default).
  emulate_q8  the input of every product with a quantized weight is replaced by its int8
              quantize-dequantize round trip, as the engine's integer kernels see it.
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


def q8_round_trip(x, block):
    """Quantize-dequantize rows of x to int8 in blocks of `block`, in float32 arithmetic.

    Per block: d = amax/127, q = rint(x * 127/amax) (half to even), x' = d*q."""
    x32 = np.asarray(x, dtype=np.float32)
    shape = x32.shape
    b = x32.reshape(-1, block)
    amax = np.max(np.abs(b), axis=1, keepdims=True)
    d = amax / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(amax == 0, np.float32(0), np.float32(127) / amax).astype(np.float32)
    q = np.rint(b * inv)            # float32 product, then round half to even
    return (d * q).astype(np.float32).reshape(shape)


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
    def __init__(self, path, dtype=np.float64, kv_f16=True, emulate_q8=False):
        self.gguf = GGUFFile(path)
        self.dtype = dtype
        self.kv_f16 = kv_f16
        self.emulate_q8 = emulate_q8
        self._weights = {}

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

        self.output_name = "output.weight" if "output.weight" in self.gguf.tensors else "token_embd.weight"

    # ---- weights ----

    def weight(self, name):
        """A tensor as an array in the compute dtype, dims reversed (row-major):
        [in, out] -> (out, in); [in, out, n_expert] -> (n_expert, out, in)."""
        if name not in self._weights:
            info = self.gguf.tensors[name]
            values = dequant.dequantize(self.gguf.tensor_bytes(name), info.type, info.n_elements)
            self._weights[name] = values.reshape(tuple(reversed(info.dims))).astype(self.dtype)
        return self._weights[name]

    def matmul(self, name, x, expert=None):
        """y = W x for each row of x (x: (..., in)), with W the named weight (or the
        slice `expert` of a 3-D expert tensor)."""
        w = self.weight(name)
        if expert is not None:
            w = w[expert]
        if self.emulate_q8:
            ttype = self.gguf.tensors[name].type
            if ttype in _Q8_BLOCK_32:
                x = q8_round_trip(x, 32).astype(self.dtype)
            elif ttype in _Q8_BLOCK_256:
                x = q8_round_trip(x, 256).astype(self.dtype)
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

    def attention(self, layer, x, cos, sin):
        n_tok = x.shape[0]
        H, Hkv, D = self.n_head, self.n_head_kv, self.head_dim
        pre = f"blk.{layer}."

        h = rms_norm(x, self.eps) * self.weight(pre + "attn_norm.weight")
        q = self.matmul(pre + "attn_q.weight", h).reshape(n_tok, H, D)
        k = self.matmul(pre + "attn_k.weight", h).reshape(n_tok, Hkv, D)
        v = self.matmul(pre + "attn_v.weight", h).reshape(n_tok, Hkv, D)

        q = rms_norm(q, self.eps) * self.weight(pre + "attn_q_norm.weight")
        k = rms_norm(k, self.eps) * self.weight(pre + "attn_k_norm.weight")
        q = self.apply_rope(q, cos, sin)
        k = self.apply_rope(k, cos, sin)

        if self.kv_f16:  # the KV cache holds float16
            k = k.astype(np.float16).astype(self.dtype)
            v = v.astype(np.float16).astype(self.dtype)

        group = H // Hkv
        causal = np.tril(np.ones((n_tok, n_tok), dtype=bool))
        heads = np.empty((n_tok, H, D), dtype=self.dtype)
        for head in range(H):
            kv = head // group
            scores = (q[:, head, :] @ k[:, kv, :].T) / math.sqrt(D)   # (query, key)
            scores = np.where(causal, scores, -np.inf)
            heads[:, head, :] = softmax(scores, axis=1) @ v[:, kv, :]

        return self.matmul(pre + "attn_output.weight", heads.reshape(n_tok, H * D))

    def moe(self, layer, x):
        pre = f"blk.{layer}."
        h = rms_norm(x, self.eps) * self.weight(pre + "ffn_norm.weight")
        probs = softmax(self.matmul(pre + "ffn_gate_inp.weight", h), axis=1)   # (n_tok, NE)

        out = np.zeros_like(x)
        for t in range(x.shape[0]):
            # The K most probable experts, descending; ties go to the lower index.
            selected = np.argsort(-probs[t], kind="stable")[:self.n_expert_used]
            weights = probs[t, selected]
            weights = weights / max(np.sum(weights), _MIN_WEIGHT_SUM)
            ht = h[t:t + 1]
            for e, w in zip(selected, weights):
                gate = self.matmul(pre + "ffn_gate_exps.weight", ht, expert=e)
                up = self.matmul(pre + "ffn_up_exps.weight", ht, expert=e)
                down = self.matmul(pre + "ffn_down_exps.weight", silu(gate) * up, expert=e)
                out[t] += w * down[0]
        return out

    def forward(self, tokens):
        """Logits (n_tokens, n_vocab) for tokens at positions 0..n_tokens-1."""
        tokens = np.asarray(tokens, dtype=np.int64)
        x = self.weight("token_embd.weight")[tokens].copy()   # (n_tok, E)
        cos, sin = self.rope_cos_sin(np.arange(len(tokens)))

        for layer in range(self.n_layer):
            x = x + self.attention(layer, x, cos, sin)
            x = x + self.moe(layer, x)

        h = rms_norm(x, self.eps) * self.weight("output_norm.weight")
        return self.matmul(self.output_name, h)[:, :self.n_vocab]
