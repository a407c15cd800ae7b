"""A numpy reference forward pass for `qwen3moe` GGUF models (llama.cpp's graph).

Written independently of the engine's C++ sources, from the model's public description.
Computation is float64 by default; weights are dequantized once (to float32, then to the
compute dtype) and cached.

The blocks it shares with other architectures (norms, rope, attention, routing, the
roundings below) are in blocks.py. Two options emulate what the engine does on purpose,
so the comparison can be tight:
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
import numpy as np

from blocks import Choices, GGUFModel, apply_rope, causal_attention, rms_norm, rope_cos_sin

ARCH = "qwen3moe"


class Qwen3MoE(GGUFModel):
    """A qwen3moe GGUF file as a numpy model: Qwen3MoE(path).forward(tokens) -> logits."""

    ARCH = ARCH

    def __init__(self, path, dtype=np.float64, kv_f16=True, emulate_q8=False):
        super().__init__(path, dtype, kv_f16, emulate_q8)
        hp = self.hp
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

        self.yarn = self.gguf.metadata.get(f"{ARCH}.rope.scaling.type") == "yarn"
        if self.yarn:
            self.yarn_factor = hp("rope.scaling.factor")
            self.yarn_orig_ctx = hp("rope.scaling.original_context_length")

        # Without output.weight the lm head is the token embedding (tied).
        tied = "output.weight" not in self.gguf.tensors
        self.output_name = "token_embd.weight" if tied else "output.weight"

    # ---- rope ----

    def rope_cos_sin(self, positions):
        """cos and sin tables, shape (n_positions, n_rot/2), for NEOX-layout rope."""
        yarn = (self.yarn_factor, self.yarn_orig_ctx) if self.yarn else None
        return rope_cos_sin(positions, self.n_rot, self.rope_base, yarn)

    def apply_rope(self, x, cos, sin):
        """x: (n_tokens, n_heads, head_dim). Element i pairs with i + n_rot/2."""
        return apply_rope(x, cos, sin, self.n_rot)

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
        k, v = self.cache_kv(k, v, layer, pos, past_k, past_v)

        heads = causal_attention(q, k, v, pos, self.dtype)
        out = self.matmul(pre + "attn_output.weight", heads.reshape(n_tok, H * D),
                          pre + "attn_out", pos)
        return out, k, v

    def moe(self, layer, x, pos):
        h = rms_norm(x, self.eps) * self.weight(f"blk.{layer}.ffn_norm.weight")
        return self.routed_moe(layer, h, pos)

    def forward(self, tokens, take=None, resume=None):
        """Logits (n_tokens, n_vocab) for tokens at positions 0..n_tokens-1.

        take: {key: value} choices to take at near-ties (see Choices). Afterwards
        self.choices holds the near-ties this pass met, and self.trace the residual
        stream entering each layer (and leaving the last) and each layer's K/V cache.
        resume: (trace, layer, position), the trace of an earlier full pass over the tokens
        that made the same choices before `position` and below `layer`: it supplies
        those, and only positions from `position` on, layers from `layer` on, are
        computed (their logits returned; near-ties are recorded for them only)."""
        trace, first_layer, start, pos, x = self.begin_pass(tokens, take, resume)
        n = len(tokens)
        cos, sin = self.rope_cos_sin(pos)
        empty = np.zeros((0, self.n_head_kv, self.head_dim), dtype=self.dtype)

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
