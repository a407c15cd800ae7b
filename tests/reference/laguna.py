"""A numpy reference forward pass for `laguna` GGUF models (poolside Laguna).

Written from the architecture's description (specs/laguna.md: llama.cpp's graph), not
from the engine's C++ sources. Every layer: pre-norm attention with QK-norm and a softplus
output gate computed from the attention's normed input (one gate per head or one per
element, by the width of attn_gate), then a pre-norm FFN: dense SwiGLU in the leading
`leading_dense_block_count` layers, else routed experts (sigmoid scores, top-k of the
scores plus a selection-only bias, the unbiased scores renormalised and scaled) plus an
ungated shared expert. The number of query heads is per layer. With
`attention.sliding_window` n > 0, layer il is sliding-window (SWA: a query sees itself
and the n-1 tokens before it) iff il % sliding_window_pattern != 0; full layers use
`rope.dimension_count` dims of NEOX rope with `rope.freq_base` and YaRN if configured,
SWA layers `rope.dimension_count_swa` dims with `rope.freq_base_swa` and no scaling.

Options as in qwen3moe.py and blocks.GGUFModel (kv_f16, emulate_q8). forward() takes
the same `take` and `resume` arguments, so follow_ties.py works here.
"""
import numpy as np

from blocks import GGUFModel, apply_rope, causal_attention, rms_norm, rope_cos_sin, softplus

ARCH = "laguna"


class Laguna(GGUFModel):
    """A laguna GGUF file as a numpy model: Laguna(path).forward(tokens) -> logits."""

    ARCH = ARCH

    def __init__(self, path, dtype=np.float64, kv_f16=True, emulate_q8=False):
        super().__init__(path, dtype, kv_f16, emulate_q8)
        hp = self.hp
        md = self.gguf.metadata
        tensors = self.gguf.tensors

        self.n_layer = hp("block_count")
        self.n_embd = hp("embedding_length")
        self.eps = hp("attention.layer_norm_rms_epsilon")

        def per_layer(value):
            return list(value) if isinstance(value, list) else [value] * self.n_layer

        self.n_head = per_layer(hp("attention.head_count"))
        n_head_kv = per_layer(hp("attention.head_count_kv", self.n_head))
        if len(set(n_head_kv)) != 1:
            raise ValueError(f"{path}: head_count_kv differs between layers")
        self.n_head_kv = n_head_kv[0]
        # llama.cpp's default head size uses layer 0's head count.
        self.head_dim = hp("attention.key_length", self.n_embd // self.n_head[0])
        if hp("attention.value_length", self.head_dim) != self.head_dim:
            raise ValueError(f"{path}: key_length and value_length differ")

        # Sliding-window layers: il % pattern != 0 (layer 0 is full), if a window is set.
        self.n_swa = hp("attention.sliding_window", 0)
        pattern = hp("attention.sliding_window_pattern", 4)
        if isinstance(pattern, list):
            raise ValueError(f"{path}: an array sliding_window_pattern is not supported "
                             f"for {ARCH}")
        self.swa = [self.n_swa > 0 and il % pattern != 0 for il in range(self.n_layer)]

        # Full layers: partial rotary, freq_base, YaRN (or linear scaling) if configured.
        self.n_rot = hp("rope.dimension_count", self.head_dim)
        self.rope_base = hp("rope.freq_base", 10000.0)
        scaling = md.get(f"{ARCH}.rope.scaling.type", "linear")
        factor = md.get(f"{ARCH}.rope.scaling.factor", 0.0) or 0.0
        self.yarn, self.yarn_attn_factor, self.linear_scale = None, 1.0, 1.0
        if scaling == "yarn":
            self.yarn = (hp("rope.scaling.factor"),
                         hp("rope.scaling.original_context_length", hp("context_length")))
            self.yarn_attn_factor = hp("rope.scaling.attn_factor", 1.0)
        elif scaling == "linear":
            if factor not in (0.0, 1.0):
                self.linear_scale = 1.0 / factor
        elif scaling != "none":
            raise ValueError(f"{path}: rope.scaling.type {scaling!r} is not supported")
        # SWA layers: their own rotary width and base, plain rope.
        self.n_rot_swa = self.n_rot
        self.rope_base_swa = self.rope_base
        if self.n_swa > 0:
            self.n_rot_swa = hp("rope.dimension_count_swa", self.n_rot)
            self.rope_base_swa = hp("rope.freq_base_swa", self.rope_base)

        self.n_dense = hp("leading_dense_block_count")
        self.n_expert = hp("expert_count")
        self.n_expert_used = hp("expert_used_count")
        gating = hp("expert_gating_func", 0)
        self.gating = "softmax" if gating == 1 else "sigmoid"   # a missing key: sigmoid
        self.weights_norm = bool(hp("expert_weights_norm", False))
        scale = hp("expert_weights_scale", 0.0)
        self.weights_scale = None if scale in (0.0, 1.0) else scale

        # The gate's width decides per layer: one gate per head, or one per element.
        self.per_head_gate = []
        for il in range(self.n_layer):
            width = tensors[f"blk.{il}.attn_gate.weight"].dims[1]
            H = self.n_head[il]
            if width not in (H, H * self.head_dim):
                raise ValueError(f"{path}: blk.{il}.attn_gate.weight has width {width}, "
                                 f"not {H} or {H * self.head_dim}")
            self.per_head_gate.append(width == H)

        tied = "output.weight" not in tensors
        self.output_name = "token_embd.weight" if tied else "output.weight"

    # ---- rope ----

    def rope_tables(self, pos):
        """{False: full-layer (cos, sin), True: SWA-layer (cos, sin)} for positions pos."""
        full = rope_cos_sin(pos * self.linear_scale, self.n_rot, self.rope_base, self.yarn,
                            self.yarn_attn_factor)
        tables = {False: full}
        if any(self.swa):
            tables[True] = rope_cos_sin(pos, self.n_rot_swa, self.rope_base_swa)
        return tables

    # ---- attention ----

    def project(self, name, h, pos, site):
        """matmul with the optional bias blk.<>.<name>.bias."""
        out = self.matmul(name + ".weight", h, site, pos)
        if name + ".bias" in self.gguf.tensors:
            out = out + self.weight(name + ".bias")
        return out

    def attention(self, layer, h, pos, cos, sin, past_k, past_v):
        """h: the normed rows of positions `pos`; past_k/past_v: the cached K/V of the
        positions before them. Returns (output, k, v), k/v including the past."""
        n_tok = h.shape[0]
        H, Hkv, D = self.n_head[layer], self.n_head_kv, self.head_dim
        pre = f"blk.{layer}."
        site = pre + "attn_in"

        if pre + "attn_qkv.weight" in self.gguf.tensors:   # fused q|k|v
            qkv = self.project(pre + "attn_qkv", h, pos, site)
            q, k, v = np.split(qkv, [H * D, (H + Hkv) * D], axis=1)
        else:
            q = self.project(pre + "attn_q", h, pos, site)
            k = self.project(pre + "attn_k", h, pos, site)
            v = self.project(pre + "attn_v", h, pos, site)
        q, k, v = q.reshape(n_tok, H, D), k.reshape(n_tok, Hkv, D), v.reshape(n_tok, Hkv, D)
        # The output gate reads the same normed input.
        gate = softplus(self.matmul(pre + "attn_gate.weight", h, site, pos))

        q = rms_norm(q, self.eps) * self.weight(pre + "attn_q_norm.weight")
        k = rms_norm(k, self.eps) * self.weight(pre + "attn_k_norm.weight")
        n_rot = self.n_rot_swa if self.swa[layer] else self.n_rot
        q = apply_rope(q, cos, sin, n_rot)
        k = apply_rope(k, cos, sin, n_rot)
        k, v = self.cache_kv(k, v, layer, pos, past_k, past_v)

        window = self.n_swa if self.swa[layer] else None
        heads = causal_attention(q, k, v, pos, self.dtype, window)
        if self.per_head_gate[layer]:
            heads = heads * gate[:, :, None]
        else:
            heads = heads * gate.reshape(n_tok, H, D)
        out = self.matmul(pre + "attn_output.weight", heads.reshape(n_tok, H * D),
                          pre + "attn_out", pos)
        return out, k, v

    # ---- FFN ----

    def ffn(self, layer, h2, pos):
        if layer < self.n_dense:
            return self.swiglu_ffn(layer, "", h2, pos)
        routed = self.routed_moe(layer, h2, pos, gating=self.gating,
                                 selection_bias=f"blk.{layer}.exp_probs_b.bias",
                                 norm=self.weights_norm, scale=self.weights_scale)
        return routed + self.swiglu_ffn(layer, "_shexp", h2, pos)   # the shared expert: no gate

    # ---- the graph ----

    def forward(self, tokens, take=None, resume=None):
        """Logits (n_tokens, n_vocab) for tokens at positions 0..n_tokens-1.

        take: {key: value} choices to take at near-ties (see blocks.Choices). Afterwards
        self.choices holds the near-ties this pass met, and self.trace the residual
        stream entering each layer (and leaving the last) and each layer's K/V cache
        (all positions, also on SWA layers: the window is applied by the mask).
        resume: (trace, layer, position), the trace of an earlier full pass over the tokens
        that made the same choices before `position` and below `layer`: it supplies
        those, and only positions from `position` on, layers from `layer` on, are
        computed (their logits returned; near-ties are recorded for them only)."""
        trace, first_layer, start, pos, x = self.begin_pass(tokens, take, resume)
        tables = self.rope_tables(pos)
        shape = (0, self.n_head_kv, self.head_dim)

        L = self.n_layer
        self.trace = {"x": [None] * (L + 1), "k": [None] * L, "v": [None] * L}
        for layer in range(first_layer, L):
            pre = f"blk.{layer}."
            self.trace["x"][layer] = x
            past_k = trace["k"][layer][:start] if resume else np.zeros(shape, self.dtype)
            past_v = trace["v"][layer][:start] if resume else np.zeros(shape, self.dtype)
            h = rms_norm(x, self.eps) * self.weight(pre + "attn_norm.weight")
            cos, sin = tables[self.swa[layer]]
            out, self.trace["k"][layer], self.trace["v"][layer] = self.attention(
                layer, h, pos, cos, sin, past_k, past_v)
            x = x + out
            h2 = rms_norm(x, self.eps) * self.weight(pre + "ffn_norm.weight")
            x = x + self.ffn(layer, h2, pos)
        self.trace["x"][L] = x

        h = rms_norm(x, self.eps) * self.weight("output_norm.weight")
        return self.matmul(self.output_name, h, "output_in", pos)[:, :self.n_vocab]
