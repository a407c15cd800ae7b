"""A numpy reference forward pass for `qwen35moe` GGUF models (Qwen3.5 / Qwen3.6 MoE).

Written from the architecture's description (specs/qwen35moe.md: llama.cpp's graph), not
from the engine's C++ sources. A hybrid stack: every `full_attention_interval`-th layer is
gated full attention (partial NEOX rope, a sigmoid output gate per element), the others
are Gated DeltaNet linear attention (a causal depthwise conv, then the gated delta rule
over a per-head [Dk x Dv] state). Every layer has a routed MoE (softmax, top-k,
renormalised) plus a shared expert with a sigmoid gate per token.

Options as in qwen3moe.py and blocks.GGUFModel (kv_f16, emulate_q8), and
  delta_form  "recurrent": the delta rule token by token (what llama.cpp's CPU op does);
              "chunked": the chunked form (llama.cpp's graph for backends without the op),
              in chunks of `chunk` tokens (64 there). The two are the same math.
The near-ties of the roundings are recorded in self.choices as in qwen3moe.py, and
forward() takes the same `take` and `resume` arguments, so follow_ties.py works here.
"""
import math

import numpy as np

from blocks import (Choices, GGUFModel, apply_rope, causal_attention, l2_norm, rms_norm,
                    rope_cos_sin, sigmoid, silu, softplus)

ARCH = "qwen35moe"
DELTA_FORMS = ("recurrent", "chunked")


# ---- the gated delta rule ----
# q, k: (n, H, Dk), already mapped to the H value heads and L2-normalised; v: (n, H, Dv);
# g (log decay, <= 0) and beta: (n, H); state: (H, Dk, Dv), S_h[key][value]. Both forms
# return (o (n, H, Dv), the state after the last token).

def delta_rule_recurrent(q, k, v, g, beta, state):
    """Token by token: decay, predict with the decayed state, rank-1 update, read the
    updated state with q / sqrt(Dk)."""
    scale = 1.0 / math.sqrt(q.shape[2])
    o = np.empty(v.shape, dtype=v.dtype)
    for t in range(q.shape[0]):
        state = np.exp(g[t])[:, None, None] * state
        kv = (k[t][:, None, :] @ state)[:, 0]                  # S^T k: (H, Dv)
        delta = beta[t][:, None] * (v[t] - kv)
        state = state + k[t][:, :, None] * delta[:, None, :]
        o[t] = (q[t][:, None, :] @ state)[:, 0] * scale
    return o, state


def delta_rule_chunked(q, k, v, g, beta, state, chunk=64):
    """The chunked (WY) form: within a chunk, with G the cumulative log decay,
    A[t][s] = beta_t (k_t.k_s) e^(G_t - G_s) for s < t, V' = (I + A)^-1 (beta V -
    beta e^G K S_prev), O = e^G Q S_prev + M V' with M[t][s] = (q_t.k_s) e^(G_t - G_s)
    for s <= t, S_next = e^(G_last) S_prev + (e^(G_last - G) K)^T V'."""
    n = q.shape[0]
    q = q * (1.0 / math.sqrt(q.shape[2]))
    o = np.empty(v.shape, dtype=v.dtype)
    for c0 in range(0, n, chunk):
        c1 = min(n, c0 + chunk)
        L = c1 - c0
        Q, K, V = (a[c0:c1].transpose(1, 0, 2) for a in (q, k, v))    # (H, L, D)
        G = np.cumsum(g[c0:c1].T, axis=1)                             # (H, L)
        b = beta[c0:c1].T                                             # (H, L)
        causal = np.tril(np.ones((L, L), dtype=bool))                 # s <= t
        strict = np.tril(np.ones((L, L), dtype=bool), -1)             # s < t
        decay = np.exp(np.where(causal, G[:, :, None] - G[:, None, :], -np.inf))
        KT = K.transpose(0, 2, 1)
        A = np.where(strict, b[:, :, None] * (K @ KT) * decay, 0)
        eye = np.broadcast_to(np.eye(L, dtype=A.dtype), A.shape)
        eG = np.exp(G)
        # (I + A) is unit lower-triangular; one solve serves both right-hand sides.
        UW = np.linalg.solve(eye + A, np.concatenate(
            [b[:, :, None] * V, (b * eG)[:, :, None] * K], axis=2))
        U, W = UW[:, :, :V.shape[2]], UW[:, :, V.shape[2]:]
        Vp = U - W @ state
        O = (eG[:, :, None] * Q) @ state + ((Q @ KT) * decay) @ Vp
        state = (np.exp(G[:, -1])[:, None, None] * state
                 + (np.exp(G[:, -1:] - G)[:, :, None] * K).transpose(0, 2, 1) @ Vp)
        o[c0:c1] = O.transpose(1, 0, 2)
    return o, state


class Qwen35MoE(GGUFModel):
    """A qwen35moe GGUF file as a numpy model: Qwen35MoE(path).forward(tokens) -> logits."""

    ARCH = ARCH

    def __init__(self, path, dtype=np.float64, kv_f16=True, emulate_q8=False,
                 delta_form="recurrent", chunk=64):
        super().__init__(path, dtype, kv_f16, emulate_q8)
        if delta_form not in DELTA_FORMS:
            raise ValueError(f"delta_form {delta_form!r}: one of {', '.join(DELTA_FORMS)}")
        if chunk < 1:
            raise ValueError(f"chunk {chunk}: must be positive")
        self.delta_form = delta_form
        self.chunk = chunk
        hp = self.hp
        md = self.gguf.metadata

        # The main stack; trailing NextN/MTP blocks are not part of the forward pass.
        self.n_layer = hp("block_count") - hp("nextn_predict_layers", 0)
        self.n_embd = hp("embedding_length")
        self.eps = hp("attention.layer_norm_rms_epsilon")

        def per_layer(value):
            return list(value) if isinstance(value, list) else [value] * self.n_layer

        self.n_head = per_layer(hp("attention.head_count"))
        self.n_head_kv = per_layer(hp("attention.head_count_kv", hp("attention.head_count")))
        self.head_dim = hp("attention.key_length", self.n_embd // max(self.n_head))
        if hp("attention.value_length", self.head_dim) != self.head_dim:
            raise ValueError(f"{path}: key_length and value_length differ")
        self.n_rot = hp("rope.dimension_count", self.head_dim)
        sections = hp("rope.dimension_sections")
        if sum(sections) != self.n_rot // 2:   # they matter only for non-text positions
            raise ValueError(f"{path}: rope sections {sections} do not sum to n_rot/2")
        self.rope_base = hp("rope.freq_base", 10000.0)
        # None in Qwen3.5/3.6; ggml's rope applies YaRN the same way for every rope mode.
        self.yarn = None
        if md.get(f"{ARCH}.rope.scaling.type") == "yarn":
            self.yarn = (hp("rope.scaling.factor"), hp("rope.scaling.original_context_length"))

        self.n_expert = hp("expert_count")
        self.n_expert_used = hp("expert_used_count")

        self.conv_kernel = hp("ssm.conv_kernel")
        self.state_size = hp("ssm.state_size")
        self.n_k_heads = hp("ssm.group_count")
        self.n_v_heads = hp("ssm.time_step_rank")
        self.key_dim = self.n_k_heads * self.state_size
        self.value_dim = self.n_v_heads * self.state_size
        if hp("ssm.inner_size") != self.value_dim:
            raise ValueError(f"{path}: ssm.inner_size is not time_step_rank x state_size")
        self.conv_dim = 2 * self.key_dim + self.value_dim

        recurrent = md.get(f"{ARCH}.attention.recurrent_layers")
        if recurrent is not None:
            self.recurrent = [bool(r) for r in recurrent[:self.n_layer]]
        else:
            interval = hp("full_attention_interval", 4)
            self.recurrent = [(il + 1) % interval != 0 for il in range(self.n_layer)]

        tied = "output.weight" not in self.gguf.tensors
        self.output_name = "token_embd.weight" if tied else "output.weight"

    # ---- gated full attention ----

    def attention(self, layer, h, pos, cos, sin, past_k, past_v):
        """h: the normed rows of positions `pos`; past_k/past_v: the cached K/V of the
        positions before them. Returns (output, k, v), k/v including the past."""
        n_tok = h.shape[0]
        H, Hkv, D = self.n_head[layer], self.n_head_kv[layer], self.head_dim
        pre = f"blk.{layer}."

        # Query and gate interleaved per head: rows [2hD, 2hD+D) query, then D gate rows.
        qg = self.matmul(pre + "attn_q.weight", h, pre + "attn_in", pos).reshape(n_tok, H, 2 * D)
        q, gate = qg[:, :, :D], qg[:, :, D:]
        k = self.matmul(pre + "attn_k.weight", h, pre + "attn_in", pos).reshape(n_tok, Hkv, D)
        v = self.matmul(pre + "attn_v.weight", h, pre + "attn_in", pos).reshape(n_tok, Hkv, D)

        q = rms_norm(q, self.eps) * self.weight(pre + "attn_q_norm.weight")
        k = rms_norm(k, self.eps) * self.weight(pre + "attn_k_norm.weight")
        q = apply_rope(q, cos, sin, self.n_rot)
        k = apply_rope(k, cos, sin, self.n_rot)
        k, v = self.cache_kv(k, v, layer, pos, past_k, past_v)

        heads = causal_attention(q, k, v, pos, self.dtype) * sigmoid(gate)
        out = self.matmul(pre + "attn_output.weight", heads.reshape(n_tok, H * D),
                          pre + "attn_out", pos)
        return out, k, v

    # ---- Gated DeltaNet ----

    def delta_rule(self, q, k, v, g, beta, state):
        if self.delta_form == "chunked":
            return delta_rule_chunked(q, k, v, g, beta, state, self.chunk)
        return delta_rule_recurrent(q, k, v, g, beta, state)

    def delta_net(self, layer, h, pos, past):
        """h: the normed rows of positions `pos`; past: the trace entry of this layer for
        the positions before them (None at the start). Returns (output, trace entry for
        positions 0..pos[-1]): the pre-conv projections and the delta rule's inputs."""
        n_tok = h.shape[0]
        Hk, Hv, S, K = self.n_k_heads, self.n_v_heads, self.state_size, self.conv_kernel
        pre = f"blk.{layer}."

        qkv = self.matmul(pre + "attn_qkv.weight", h, pre + "attn_in", pos)    # (n, conv_dim)
        z = self.matmul(pre + "attn_gate.weight", h, pre + "attn_in", pos).reshape(n_tok, Hv, S)
        beta = sigmoid(self.matmul(pre + "ssm_beta.weight", h, pre + "attn_in", pos))
        alpha = self.matmul(pre + "ssm_alpha.weight", h, pre + "attn_in", pos)
        # ssm_a holds A = -exp(A_log): g <= 0, the per-token decay is exp(g).
        g = softplus(alpha + self.weight(pre + "ssm_dt.bias")) * self.weight(pre + "ssm_a")

        # Causal depthwise conv over the pre-activation projections: tap K-1 multiplies
        # the current token, tap i the token K-1-i before it (zeros before the start).
        prev = past["qkv"] if past else np.zeros((0, self.conv_dim), dtype=self.dtype)
        history = np.concatenate([np.zeros((K - 1, self.conv_dim), dtype=self.dtype),
                                  prev, qkv])[len(prev):]
        taps = self.weight(pre + "ssm_conv1d.weight")                         # (conv_dim, K)
        u = sum(taps[:, i] * history[i:i + n_tok] for i in range(K))
        u = silu(u)

        # Value head h reads key head h mod Hk (the converter's tiled order).
        tile = np.arange(Hv) % Hk
        q = l2_norm(u[:, :self.key_dim].reshape(n_tok, Hk, S), self.eps)[:, tile]
        k = l2_norm(u[:, self.key_dim:2 * self.key_dim].reshape(n_tok, Hk, S), self.eps)[:, tile]
        v = u[:, 2 * self.key_dim:].reshape(n_tok, Hv, S)

        state = np.zeros((Hv, S, S), dtype=self.dtype)
        if past:   # the state after the past positions, from their recorded inputs
            _, state = self.delta_rule(past["q"], past["k"], past["v"], past["g"],
                                       past["beta"], state)
        o, _ = self.delta_rule(q, k, v, g, beta, state)

        # Gated RMSNorm per value head (one [S] weight for all heads), then out.
        o = rms_norm(o, self.eps) * self.weight(pre + "ssm_norm.weight") * silu(z)
        out = self.matmul(pre + "ssm_out.weight", o.reshape(n_tok, Hv * S), pre + "attn_out", pos)
        entry = {"qkv": qkv, "q": q, "k": k, "v": v, "g": g, "beta": beta}
        if past:
            entry = {name: np.concatenate([past[name], value]) for name, value in entry.items()}
        return out, entry

    # ---- FFN ----

    def shared_expert(self, layer, h, pos):
        """sigmoid(ffn_gate_inp_shexp . h), one scalar per token, times the SwiGLU FFN."""
        pre = f"blk.{layer}."
        gate = self.matmul(pre + "ffn_gate_inp_shexp.weight", h, pre + "ffn_in", pos)
        return sigmoid(gate).reshape(-1, 1) * self.swiglu_ffn(layer, "_shexp", h, pos)

    # ---- the graph ----

    def forward(self, tokens, take=None, resume=None):
        """Logits (n_tokens, n_vocab) for tokens at positions 0..n_tokens-1.

        take: {key: value} choices to take at near-ties (see blocks.Choices). Afterwards
        self.choices holds the near-ties this pass met, and self.trace the residual
        stream entering each layer (and leaving the last), each attention layer's K/V
        cache ("k", "v") and each DeltaNet layer's inputs ("delta": the pre-conv
        projections, q, k, v, g, beta of every position).
        resume: (trace, layer, position), the trace of an earlier full pass over the tokens
        that made the same choices before `position` and below `layer`: it supplies
        those, and only positions from `position` on, layers from `layer` on, are
        computed (their logits returned; near-ties are recorded for them only)."""
        trace, first_layer, start, pos, x = self.begin_pass(tokens, take, resume)
        n = len(tokens)
        cos, sin = rope_cos_sin(pos, self.n_rot, self.rope_base, self.yarn)

        L = self.n_layer
        self.trace = {"x": [None] * (L + 1), "k": [None] * L, "v": [None] * L,
                      "delta": [None] * L}
        for layer in range(first_layer, L):
            pre = f"blk.{layer}."
            self.trace["x"][layer] = x
            h = rms_norm(x, self.eps) * self.weight(pre + "attn_norm.weight")
            if self.recurrent[layer]:
                past = None
                if resume and start > 0:
                    past = {name: value[:start] for name, value in trace["delta"][layer].items()}
                out, self.trace["delta"][layer] = self.delta_net(layer, h, pos, past)
            else:
                shape = (0, self.n_head_kv[layer], self.head_dim)
                past_k = trace["k"][layer][:start] if resume else np.zeros(shape, self.dtype)
                past_v = trace["v"][layer][:start] if resume else np.zeros(shape, self.dtype)
                out, self.trace["k"][layer], self.trace["v"][layer] = self.attention(
                    layer, h, pos, cos, sin, past_k, past_v)
            x = x + out
            # post_attention_norm is the pre-FFN norm.
            h2 = rms_norm(x, self.eps) * self.weight(pre + "post_attention_norm.weight")
            x = x + (self.routed_moe(layer, h2, pos) + self.shared_expert(layer, h2, pos))
        self.trace["x"][L] = x

        h = rms_norm(x, self.eps) * self.weight("output_norm.weight")
        return self.matmul(self.output_name, h, "output_in", pos)[:, :self.n_vocab]
