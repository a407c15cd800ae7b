"""A numpy reference forward pass for `deepseek2` GGUF models (DeepSeek-V2/V3 and other MLA
checkpoints).

Written from the architecture's description (specs/deepseek2.md: llama.cpp's graph), not
from the engine's C++ sources. Every layer: pre-norm multi-head latent attention (MLA),
then a pre-norm FFN: dense SwiGLU in the leading `leading_dense_block_count` layers, else
routed experts (softmax or sigmoid scores, top-k of the scores plus a selection-only bias,
optionally limited to the best `expert_group_used_count` of `expert_group_count` groups,
the unbiased scores renormalised and scaled) plus an ungated shared expert.

MLA: q = q_b(rmsnorm(q_a x) * q_a_norm) (or attn_q x in files without q_lora), per head
[q_nope | q_pe]; kv_a_mqa x = [c | k_pe]: the latent c (rms-normed with kv_a_norm) and one
rope key k_pe shared by all heads. RoPE with NORM (adjacent-pair) pairing on q_pe and
k_pe, YaRN if configured: with `rope.scaling.yarn_log_multiplier` the rotated vectors keep
magnitude 1 and the scores are scaled by mscale^2 / sqrt(NOPE + R), mscale = 1 + 0.1 *
(yarn_log_multiplier / 0.1) * ln(factor).

attention() runs the absorbed form, as llama.cpp does for MLA files: q_abs[h] = k_b[h]
q_nope[h], the query row [q_abs | q_pe] against the cache row [c | k_pe] (one KV head),
the value the first KVL entries of the same row, u[h] = v_b[h] o[h].
attention_expanded() is the same arithmetic re-associated (per-head K = [k_b[h]^T c |
k_pe], V = v_b[h] c, ordinary multi-head attention): a check of the absorbed form.
Files with `attn_kv_b` instead of attn_k_b/attn_v_b are read by splitting it per head.

Options as in qwen3moe.py and blocks.GGUFModel (kv_f16: the cache row is rounded to
float16 once, V being a view of it; emulate_q8). forward() takes the same `take` and
`resume` arguments, so follow_ties.py works here.
"""
import math

import numpy as np

from blocks import GGUFModel, apply_rope_norm, causal_attention, rms_norm, rope_cos_sin

ARCH = "deepseek2"


class DeepSeek2(GGUFModel):
    """A deepseek2 GGUF file as a numpy model: DeepSeek2(path).forward(tokens) -> logits."""

    ARCH = ARCH

    def __init__(self, path, dtype=np.float64, kv_f16=True, emulate_q8=False):
        super().__init__(path, dtype, kv_f16, emulate_q8)
        hp = self.hp
        md = self.gguf.metadata
        tensors = self.gguf.tensors

        self.n_layer = hp("block_count")
        self.n_embd = hp("embedding_length")
        self.eps = hp("attention.layer_norm_rms_epsilon")
        self.n_head = hp("attention.head_count")

        # MLA sizes. key_length_mla/value_length_mla are the real head sizes; legacy
        # files (attn_kv_b, no *_mla keys) carry them in key_length/value_length.
        self.n_rot = hp("rope.dimension_count")
        self.kv_lora = hp("attention.kv_lora_rank")
        self.q_lora = md.get(f"{self.ARCH}.attention.q_lora_rank", 0) or 0
        self.head_k = hp("attention.key_length_mla", hp("attention.key_length"))
        self.n_nope = self.head_k - self.n_rot
        self.head_v = hp("attention.value_length_mla", hp("attention.value_length"))
        for il in range(self.n_layer):
            pre = f"blk.{il}."
            if self.q_lora:
                need = ("attn_q_a.weight", "attn_q_a_norm.weight", "attn_q_b.weight")
            else:
                need = ("attn_q.weight",)
            if (pre + "attn_k_b.weight" not in tensors
                    and pre + "attn_kv_b.weight" not in tensors):
                need += ("attn_k_b.weight",)
            missing = [pre + n for n in need if pre + n not in tensors]
            if missing:
                raise ValueError(f"{path}: missing {', '.join(missing)}")

        # RoPE: freq_base, YaRN. llama.cpp's deepseek2 keeps the rotated vectors at
        # magnitude 1 and moves YaRN's magnitude into the score scale.
        self.rope_base = hp("rope.freq_base", 10000.0)
        scaling = md.get(f"{self.ARCH}.rope.scaling.type", "none")
        factor = md.get(f"{self.ARCH}.rope.scaling.factor", 0.0) or 0.0
        self.yarn, self.rope_attn_factor, self.mscale = None, 1.0, 1.0
        if scaling == "yarn" and factor not in (0.0, 1.0):
            self.yarn = (factor, hp("rope.scaling.original_context_length", hp("context_length")))
            log_multiplier = md.get(f"{self.ARCH}.rope.scaling.yarn_log_multiplier")
            if log_multiplier is None:
                raise ValueError(f"{path}: YaRN without rope.scaling.yarn_log_multiplier is "
                                 f"not supported (llama.cpp's other magnitude rule)")
            self.rope_attn_factor = 1.0 / (1.0 + 0.1 * math.log(factor))
            self.mscale = 1.0 + 0.1 * (log_multiplier / 0.1) * math.log(factor)
        elif scaling not in ("none", "yarn"):
            raise ValueError(f"{path}: rope.scaling.type {scaling!r} is not supported")
        self.kq_scale = self.mscale ** 2 / math.sqrt(self.head_k)

        self.n_dense = hp("leading_dense_block_count", 0)
        self.n_expert = hp("expert_count")
        self.n_expert_used = hp("expert_used_count")
        # Absent: softmax, except GLM-4.7-Lite (47/48 layers, vocab 154880): sigmoid.
        glm_lite = self.n_layer in (47, 48) and self.n_vocab == 154880
        gating = hp("expert_gating_func", 2 if glm_lite else 1)
        if gating not in (1, 2):
            raise ValueError(f"{path}: expert_gating_func {gating} is not 1 or 2")
        self.gating = "softmax" if gating == 1 else "sigmoid"
        self.weights_norm = bool(hp("expert_weights_norm", False))
        scale = hp("expert_weights_scale", 0.0)
        self.weights_scale = None if scale in (0.0, 1.0) else scale
        self.groups = (hp("expert_group_count", 1), hp("expert_group_used_count", 1))

        tied = "output.weight" not in tensors
        self.output_name = "token_embd.weight" if tied else "output.weight"

    # ---- rope ----

    def rope_tables(self, pos):
        """(cos, sin) of the NORM rope for positions pos."""
        return rope_cos_sin(pos, self.n_rot, self.rope_base, self.yarn, self.rope_attn_factor)

    # ---- MLA ----

    def kv_b(self, layer):
        """(k_b, v_b) of blk.<layer> as arrays (H, KVL, NOPE) and (H, VD, KVL): from
        attn_k_b/attn_v_b, or split per head from a legacy attn_kv_b (head h's NOPE k
        rows, then its VD v rows)."""
        pre = f"blk.{layer}."
        if pre + "attn_k_b.weight" in self.gguf.tensors:
            return self.weight(pre + "attn_k_b.weight"), self.weight(pre + "attn_v_b.weight")
        kv_b = self.weight(pre + "attn_kv_b.weight").reshape(
            self.n_head, self.n_nope + self.head_v, self.kv_lora)
        return (np.ascontiguousarray(kv_b[:, :self.n_nope].transpose(0, 2, 1)),
                np.ascontiguousarray(kv_b[:, self.n_nope:]))

    def projections(self, layer, h, pos, cos, sin):
        """(q_nope (n, H, NOPE), q_pe roped (n, H, R), c normed (n, KVL), k_pe roped (n, R))
        of the normed rows h."""
        n_tok = h.shape[0]
        pre = f"blk.{layer}."
        site = pre + "attn_in"
        if self.q_lora:
            qa = self.matmul(pre + "attn_q_a.weight", h, site, pos)
            qa = rms_norm(qa, self.eps) * self.weight(pre + "attn_q_a_norm.weight")
            q = self.matmul(pre + "attn_q_b.weight", qa, pre + "attn_q_b_in", pos)
        else:
            q = self.matmul(pre + "attn_q.weight", h, site, pos)
        q = q.reshape(n_tok, self.n_head, self.head_k)
        q_nope = q[:, :, :self.n_nope]
        q_pe = apply_rope_norm(q[:, :, self.n_nope:], cos, sin, self.n_rot)

        kv = self.matmul(pre + "attn_kv_a_mqa.weight", h, site, pos)
        c = rms_norm(kv[:, :self.kv_lora], self.eps) * self.weight(pre + "attn_kv_a_norm.weight")
        k_pe = apply_rope_norm(kv[:, None, self.kv_lora:], cos, sin, self.n_rot)[:, 0]
        return q_nope, q_pe, c, k_pe

    def absorb(self, name, x, layer, pos, site):
        """Per head h: x[:, h] times the matrix h of a 3-D weight (k_b or v_b), through
        matmul (so emulate_q8 rounds each head's input). x: (n, H, in) -> (n, H, out)."""
        pre = f"blk.{layer}."
        if pre + name + ".weight" in self.gguf.tensors:
            return np.stack([self.matmul(pre + name + ".weight", x[:, h], f"{pre}{site}.{h}",
                                         pos, expert=h) for h in range(self.n_head)], axis=1)
        k_b, v_b = self.kv_b(layer)   # legacy attn_kv_b: a float product
        w = k_b if name == "attn_k_b" else v_b
        return np.einsum("hoi,nhi->nho", w, x)

    def attention(self, layer, h, pos, cos, sin, past):
        """The absorbed form. h: the normed rows of positions `pos`; past: the cache rows
        [c | k_pe] (n_past, 1, KVL + R) of the positions before them. Returns (output,
        cache rows including the past)."""
        n_tok = h.shape[0]
        pre = f"blk.{layer}."
        q_nope, q_pe, c, k_pe = self.projections(layer, h, pos, cos, sin)
        q_abs = self.absorb("attn_k_b", q_nope, layer, pos, "attn_q_nope")    # (n, H, KVL)
        query = np.concatenate([q_abs, q_pe], axis=2)                        # (n, H, KVL+R)
        row = np.concatenate([c, k_pe], axis=1)[:, None, :]                  # (n, 1, KVL+R)
        if self.kv_f16:  # the cache holds float16; V is a view of the same row
            row = self.choices.f16_round_trip(row, "k", layer, pos)
        rows = np.concatenate([past, row])
        o = causal_attention(query, rows, rows[:, :, :self.kv_lora], pos, self.dtype,
                             scale=self.kq_scale)                            # (n, H, KVL)
        u = self.absorb("attn_v_b", o, layer, pos, "attn_o_latent")          # (n, H, VD)
        out = self.matmul(pre + "attn_output.weight", u.reshape(n_tok, -1),
                          pre + "attn_out", pos)
        return out, rows

    def attention_expanded(self, layer, h, pos, cos, sin, past=None):
        """The expanded (non-absorbed) form, in plain float products: K[h] = [k_b[h]^T c |
        k_pe], V[h] = v_b[h] c, Q[h] = [q_nope | q_pe], multi-head attention with H KV
        heads. past: None, or (k, v) of the positions before. Returns (output, k, v)."""
        n_tok = h.shape[0]
        pre = f"blk.{layer}."
        q_nope, q_pe, c, k_pe = self.projections(layer, h, pos, cos, sin)
        k_b, v_b = self.kv_b(layer)
        k_nope = np.einsum("hcd,nc->nhd", k_b, c)                            # (n, H, NOPE)
        v = np.einsum("hvc,nc->nhv", v_b, c)                                 # (n, H, VD)
        k = np.concatenate([k_nope, np.broadcast_to(k_pe[:, None, :], q_pe.shape)], axis=2)
        q = np.concatenate([q_nope, q_pe], axis=2)
        if past is not None:
            k, v = np.concatenate([past[0], k]), np.concatenate([past[1], v])
        heads = causal_attention(q, k, v, pos, self.dtype, scale=self.kq_scale)
        out = self.weight(pre + "attn_output.weight") @ heads.reshape(n_tok, -1).T
        return out.T, k, v

    # ---- FFN ----

    def ffn(self, layer, h2, pos):
        if layer < self.n_dense:
            return self.swiglu_ffn(layer, "", h2, pos)
        bias = f"blk.{layer}.exp_probs_b.bias"
        routed = self.routed_moe(layer, h2, pos, gating=self.gating,
                                 selection_bias=bias if bias in self.gguf.tensors else None,
                                 norm=self.weights_norm, scale=self.weights_scale,
                                 groups=self.groups)
        return routed + self.swiglu_ffn(layer, "_shexp", h2, pos)   # the shared expert: no gate

    # ---- the graph ----

    def block(self, layer, x, pos, cos, sin, past):
        """One layer on the residual rows x: (x after the layer, its cache rows)."""
        pre = f"blk.{layer}."
        h = rms_norm(x, self.eps) * self.weight(pre + "attn_norm.weight")
        out, rows = self.attention(layer, h, pos, cos, sin, past)
        x = x + out
        h2 = rms_norm(x, self.eps) * self.weight(pre + "ffn_norm.weight")
        return x + self.ffn(layer, h2, pos), rows

    def stream_in(self, x):
        """The state entering layer 0 from the embeddings (n_tok, E)."""
        return x

    def final_hidden(self, x):
        """The rows (n_tok, E) the output norm reads from the state leaving the last layer."""
        return x

    def forward(self, tokens, take=None, resume=None):
        """Logits (n_tokens, n_vocab) for tokens at positions 0..n_tokens-1.

        take: {key: value} choices to take at near-ties (see blocks.Choices). Afterwards
        self.choices holds the near-ties this pass met, and self.trace the state entering
        each layer (and leaving the last) and each layer's cache rows [c | k_pe] ("k";
        "v" holds the same rows: V is their first KVL entries).
        resume: (trace, layer, position), the trace of an earlier full pass over the tokens
        that made the same choices before `position` and below `layer`: it supplies
        those, and only positions from `position` on, layers from `layer` on, are
        computed (their logits returned; near-ties are recorded for them only). A trace
        {"x": [embedding rows], "k": caches} resumes at layer 0 (token-by-token decoding)."""
        trace, first_layer, start, pos, x = self.begin_pass(tokens, take, resume)
        if first_layer == 0:
            x = self.stream_in(x) if x.ndim == 2 else x
        cos, sin = self.rope_tables(pos)
        empty = np.zeros((0, 1, self.kv_lora + self.n_rot), dtype=self.dtype)

        L = self.n_layer
        self.trace = {"x": [None] * (L + 1), "k": [None] * L}
        for layer in range(first_layer, L):
            self.trace["x"][layer] = x
            past = trace["k"][layer][:start] if resume else empty
            x, self.trace["k"][layer] = self.block(layer, x, pos, cos, sin, past)
        self.trace["x"][L] = x
        self.trace["v"] = self.trace["k"]

        h = rms_norm(self.final_hidden(x), self.eps) * self.weight("output_norm.weight")
        return self.matmul(self.output_name, h, "output_in", pos)[:, :self.n_vocab]


def decode_token_by_token(model, tokens):
    """Logits of each position computed alone over the latent cache of the ones before it
    (the decode path; works for every DeepSeek2 subclass)."""
    embeddings = model.weight("token_embd.weight")[tokens]
    empty = np.zeros((0, 1, model.kv_lora + model.n_rot), dtype=model.dtype)
    cache = [empty] * model.n_layer
    rows = []
    for t in range(len(tokens)):
        trace = {"x": [embeddings], "k": cache}
        rows.append(model.forward(tokens[:t + 1], resume=(trace, 0, t))[0])
        cache = model.trace["k"]
        assert len(cache[0]) == t + 1
    return np.array(rows)
