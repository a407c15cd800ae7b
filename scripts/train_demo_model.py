#!/usr/bin/python3
"""Train EPQ's demo model: a small qwen3moe on the King James Bible, exported to GGUF.

    scripts/train_demo_model.py [--minutes 50] [--out models/demo] [--epq build/epq]

Corpus: the King James Version from Debian's bible-kjv-text package (public domain in the
US; the British Crown's letters patent do not reach a machine-readable text of this age
elsewhere either), printed by the package's own `bible` program. It is plain ASCII English,
4.3 MB, with a consistent style, so a small model trained for an hour on two cores learns
to continue it recognisably. Verse numbers and chapter headings are dropped; each verse is
one line. The last 2% of the verses are held out for validation.

Tokenizer: byte-level BPE (GPT-2 byte mapping, the qwen2 pre-tokenizer, which on ASCII
text is the regex below), 4096 tokens, trained here on the training verses.

Model (qwen3moe graph, as EPQ and llama.cpp run it): 6 layers, n_embd 256, 4 heads of 64
(2 KV heads), q/k RMS norms, NEOX rope (base 10000), 64 routed experts of 128 each, top-4,
softmax -> top-k -> renormalise, tied embeddings. A Switch-style balance loss keeps every
expert in use. 256-token sequences.

Writes, in --out:
  epq-demo-kjv-f32.gguf     every tensor F32 (the exact model, for the PPL check)
  epq-demo-kjv-q4.gguf      routed experts Q4_0, other matrices Q8_0, norms F32 (committed)
  valid.txt                 the held-out verses
  report.json               corpus, sizes, steps, time, PyTorch's validation perplexity
and checks, when --epq is given, that EPQ tokenizes the validation text exactly as this
script does and that `epq perplexity` on the F32 file matches PyTorch's.
"""
import argparse
import collections
import json
import math
import os
import re
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

# ---- corpus ---------------------------------------------------------------------------


def kjv_verses():
    """Every verse of the KJV as one line of text, in canonical order."""
    out = subprocess.run(["bible", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
    verses, current = [], None
    for line in out.splitlines():
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m:
            if current is not None:
                verses.append(current)
            current = m.group(2).strip()
        elif line.strip() and current is not None and not re.match(r"^\S.* \d+$", line):
            current += " " + line.strip()   # a wrapped verse continues
        elif line.strip() and current is not None:
            verses.append(current)          # a chapter heading ends the verse
            current = None
    if current is not None:
        verses.append(current)
    return verses


# ---- tokenizer ------------------------------------------------------------------------

# qwen2's pre-tokenizer restricted to ASCII, where \p{L} is [A-Za-z] and \p{N} is [0-9].
PRETOKENIZE = re.compile(r"'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]"
                         r"| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_to_unicode():
    """GPT-2's reversible map from bytes to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


class BPE:
    SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

    def __init__(self, merges):
        self.byte_map = byte_to_unicode()
        self.merges = merges
        self.rank = {pair: i for i, pair in enumerate(merges)}
        self.tokens = [self.byte_map[b] for b in range(256)] + [a + b for a, b in merges] + self.SPECIALS
        self.id = {t: i for i, t in enumerate(self.tokens)}
        self.cache = {}

    @staticmethod
    def train(lines, vocab_size):
        """Merges learned from word counts, updating pair counts incrementally."""
        byte_map = byte_to_unicode()
        counts = collections.Counter()
        for line in lines:
            counts.update(PRETOKENIZE.findall(line + "\n"))
        words = [[byte_map[b] for b in w.encode()] for w in counts]
        freq = list(counts.values())
        pairs = collections.Counter()
        where = collections.defaultdict(set)
        for i, w in enumerate(words):
            for a, b in zip(w, w[1:]):
                pairs[a, b] += freq[i]
                where[a, b].add(i)
        merges = []
        n_merges = vocab_size - 256 - len(BPE.SPECIALS)
        while len(merges) < n_merges and pairs:
            best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
            if pairs[best] < 2:
                break
            merges.append(best)
            joined = best[0] + best[1]
            for i in list(where[best]):
                w = words[i]
                for a, b in zip(w, w[1:]):
                    pairs[a, b] -= freq[i]
                    if pairs[a, b] <= 0:
                        del pairs[a, b]
                    where[a, b].discard(i)
                out, j = [], 0
                while j < len(w):
                    if j + 1 < len(w) and w[j] == best[0] and w[j + 1] == best[1]:
                        out.append(joined)
                        j += 2
                    else:
                        out.append(w[j])
                        j += 1
                words[i] = out
                for a, b in zip(out, out[1:]):
                    pairs[a, b] += freq[i]
                    where[a, b].add(i)
            pairs.pop(best, None)
        return BPE(merges)

    def encode_word(self, word):
        if word in self.cache:
            return self.cache[word]
        symbols = [self.byte_map[b] for b in word.encode()]
        while len(symbols) > 1:
            ranked = [(self.rank.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(symbols, symbols[1:]))]
            r, i = min(ranked)
            if r == 1 << 30:
                break
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
        ids = [self.id[s] for s in symbols]
        self.cache[word] = ids
        return ids

    def encode(self, text):
        return [t for w in PRETOKENIZE.findall(text) for t in self.encode_word(w)]


# ---- model ----------------------------------------------------------------------------


class Config:
    n_vocab = 4096
    n_embd = 256
    n_layer = 6
    n_head = 4
    n_head_kv = 2
    head_dim = 64
    n_expert = 64
    n_expert_used = 4
    n_ff_exp = 128
    n_ctx = 256
    rope_base = 10000.0
    eps = 1e-6


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin):
    """NEOX rotation: dimension i pairs with i + d/2. x: [B, H, T, D]."""
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half], x[..., half:]
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)


class Qwen3Moe(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        E, D = c.n_embd, c.head_dim

        def p(*shape, scale):
            return torch.nn.Parameter(torch.randn(*shape) * scale)
        self.embd = p(c.n_vocab, E, scale=0.02)
        self.layers = torch.nn.ModuleList()
        for _ in range(c.n_layer):
            layer = torch.nn.Module()
            layer.attn_norm = torch.nn.Parameter(torch.ones(E))
            layer.wq = p(c.n_head * D, E, scale=E ** -0.5)
            layer.wk = p(c.n_head_kv * D, E, scale=E ** -0.5)
            layer.wv = p(c.n_head_kv * D, E, scale=E ** -0.5)
            layer.wo = p(E, c.n_head * D, scale=(c.n_head * D) ** -0.5 / math.sqrt(2 * c.n_layer))
            layer.q_norm = torch.nn.Parameter(torch.ones(D))
            layer.k_norm = torch.nn.Parameter(torch.ones(D))
            layer.ffn_norm = torch.nn.Parameter(torch.ones(E))
            layer.router = p(c.n_expert, E, scale=0.02)
            # One parameter per expert matrix: indexing one stacked tensor would give every
            # expert's backward a gradient the size of all of them.
            layer.gate = torch.nn.ParameterList([p(c.n_ff_exp, E, scale=E ** -0.5) for _ in range(c.n_expert)])
            layer.up = torch.nn.ParameterList([p(c.n_ff_exp, E, scale=E ** -0.5) for _ in range(c.n_expert)])
            layer.down = torch.nn.ParameterList([p(E, c.n_ff_exp, scale=c.n_ff_exp ** -0.5 / math.sqrt(2 * c.n_layer))
                                                 for _ in range(c.n_expert)])
            self.layers.append(layer)
        self.out_norm = torch.nn.Parameter(torch.ones(E))
        inv = c.rope_base ** (-torch.arange(0, D // 2, dtype=torch.float64) * 2 / D)
        angles = torch.arange(c.n_ctx, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", torch.cos(angles).float(), persistent=False)
        self.register_buffer("sin", torch.sin(angles).float(), persistent=False)

    def moe(self, L, h):
        """h: [N, E] -> ([N, E], balance loss)."""
        c = self.c
        probs = F.softmax(h @ L.router.t(), dim=-1)
        top_p, top_e = probs.topk(c.n_expert_used, dim=-1)
        top_w = top_p / top_p.sum(-1, keepdim=True).clamp_min(6.103515625e-5)
        out = torch.zeros_like(h)
        flat_e = top_e.reshape(-1)
        flat_t = torch.arange(h.shape[0]).repeat_interleave(c.n_expert_used)
        flat_w = top_w.reshape(-1)
        order = torch.argsort(flat_e)
        counts = torch.bincount(flat_e, minlength=c.n_expert).tolist()
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            idx = order[start:start + n]
            start += n
            tok = flat_t[idx]
            x = h[tok]
            y = (F.silu(x @ L.gate[e].t()) * (x @ L.up[e].t())) @ L.down[e].t()
            out.index_add_(0, tok, y * flat_w[idx, None])
        share = torch.bincount(flat_e, minlength=c.n_expert).float() / flat_e.numel()
        balance = c.n_expert * (share * probs.mean(0)).sum()
        return out, balance

    def forward(self, tokens):
        c = self.c
        B, T = tokens.shape
        D = c.head_dim
        x = self.embd[tokens]
        cos, sin = self.cos[:T], self.sin[:T]
        mask = torch.full((T, T), float("-inf")).triu(1)
        balance = 0.0
        for L in self.layers:
            h = rms_norm(x, L.attn_norm, c.eps)
            q = (h @ L.wq.t()).view(B, T, c.n_head, D).transpose(1, 2)
            k = (h @ L.wk.t()).view(B, T, c.n_head_kv, D).transpose(1, 2)
            v = (h @ L.wv.t()).view(B, T, c.n_head_kv, D).transpose(1, 2)
            q = rope(rms_norm(q, L.q_norm, c.eps), cos, sin)
            k = rope(rms_norm(k, L.k_norm, c.eps), cos, sin)
            rep = c.n_head // c.n_head_kv
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(D) + mask
            o = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, c.n_head * D)
            x = x + o @ L.wo.t()
            h = rms_norm(x, L.ffn_norm, c.eps)
            y, bal = self.moe(L, h.reshape(B * T, -1))
            x = x + y.view(B, T, -1)
            balance = balance + bal
        logits = rms_norm(x, self.out_norm, c.eps) @ self.embd.t()
        return logits, balance / c.n_layer


# ---- GGUF export ----------------------------------------------------------------------

GGUF_F32, GGUF_F16, GGUF_Q4_0, GGUF_Q8_0 = 0, 1, 2, 8
T_UINT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_INT32 = 4, 6, 7, 8, 9, 5


def quantize_q8_0(x):
    """ggml's block_q8_0: f16 scale d = amax/127, 32 int8 values round(x/d)."""
    b = x.reshape(-1, 32).astype(np.float32)
    d = np.abs(b).max(1) / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0.0)
    q = np.rint(b * inv[:, None]).clip(-127, 127).astype(np.int8)
    out = np.zeros((b.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def quantize_q4_0(x):
    """ggml's block_q4_0: d = (the signed value of largest magnitude) / -8, nibbles
    min(15, int(x/d + 8.5)); element j in the low nibble of byte j, j+16 in the high."""
    b = x.reshape(-1, 32).astype(np.float32)
    idx = np.abs(b).argmax(1)
    mx = b[np.arange(b.shape[0]), idx]
    d = mx / -8.0
    inv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0.0)
    q = np.minimum(15, (b * inv[:, None] + 8.5).astype(np.int32)).clip(0, 15).astype(np.uint8)
    out = np.zeros((b.shape[0], 18), dtype=np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


class GGUFWriter:
    def __init__(self):
        self.kv = []
        self.tensors = []

    def add(self, key, vtype, value):
        self.kv.append((key, vtype, value))

    def tensor(self, name, array, gtype):
        """array: numpy, C order [..., cols]; GGUF dims are reversed (cols first)."""
        a = np.ascontiguousarray(array, dtype=np.float32)
        data = {GGUF_F32: lambda: a.tobytes(), GGUF_Q8_0: lambda: quantize_q8_0(a), GGUF_Q4_0: lambda: quantize_q4_0(a)}[gtype]()
        self.tensors.append((name, list(reversed(a.shape)), gtype, data))

    @staticmethod
    def _str(s):
        b = s.encode()
        return struct.pack("<Q", len(b)) + b

    def _value(self, vtype, value):
        if vtype == T_UINT32:
            return struct.pack("<I", value)
        if vtype == T_INT32:
            return struct.pack("<i", value)
        if vtype == T_FLOAT32:
            return struct.pack("<f", value)
        if vtype == T_BOOL:
            return struct.pack("<?", value)
        if vtype == T_STRING:
            return self._str(value)
        elem, items = value
        return struct.pack("<IQ", elem, len(items)) + b"".join(self._value(elem, v) for v in items)

    def write(self, path):
        align = 32
        head = b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for key, vtype, value in self.kv:
            head += self._str(key) + struct.pack("<I", vtype) + self._value(vtype, value)
        offset = 0
        for name, dims, gtype, data in self.tensors:
            head += self._str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            head += struct.pack("<IQ", gtype, offset)
            offset += (len(data) + align - 1) // align * align
        with open(path + ".partial", "wb") as f:
            f.write(head + b"\0" * ((-len(head)) % align))
            for _, _, _, data in self.tensors:
                f.write(data + b"\0" * ((-len(data)) % align))
        os.replace(path + ".partial", path)


def export(model, bpe, path, quantized):
    c = model.c
    w = GGUFWriter()
    a = "qwen3moe."
    w.add("general.architecture", T_STRING, "qwen3moe")
    w.add("general.name", T_STRING, "epq-demo-kjv" + ("-q4" if quantized else "-f32"))
    w.add("general.description", T_STRING, "EPQ's demo model: a small MoE trained on the King James Bible "
          "(scripts/train_demo_model.py); a plain language model, not an assistant")
    w.add("general.file_type", T_UINT32, 2 if quantized else 0)
    for key, value in [("context_length", c.n_ctx), ("embedding_length", c.n_embd), ("block_count", c.n_layer),
                       ("attention.head_count", c.n_head), ("attention.head_count_kv", c.n_head_kv),
                       ("attention.key_length", c.head_dim), ("attention.value_length", c.head_dim),
                       ("expert_count", c.n_expert), ("expert_used_count", c.n_expert_used),
                       ("expert_feed_forward_length", c.n_ff_exp)]:
        w.add(a + key, T_UINT32, value)
    w.add(a + "attention.layer_norm_rms_epsilon", T_FLOAT32, c.eps)
    w.add(a + "rope.freq_base", T_FLOAT32, c.rope_base)
    w.add("tokenizer.ggml.model", T_STRING, "gpt2")
    w.add("tokenizer.ggml.pre", T_STRING, "qwen2")
    w.add("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, bpe.tokens))
    types = [1] * (len(bpe.tokens) - len(BPE.SPECIALS)) + [3] * len(BPE.SPECIALS)
    w.add("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types))
    w.add("tokenizer.ggml.merges", T_ARRAY, (T_STRING, [f"{x} {y}" for x, y in bpe.merges]))
    eot = bpe.id["<|endoftext|>"]
    w.add("tokenizer.ggml.bos_token_id", T_UINT32, eot)
    w.add("tokenizer.ggml.eos_token_id", T_UINT32, eot)
    w.add("tokenizer.ggml.padding_token_id", T_UINT32, eot)
    w.add("tokenizer.ggml.add_bos_token", T_BOOL, False)
    # A plain language model: the conversation as text, and the model continues it.
    w.add("tokenizer.chat_template", T_STRING,
          "{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    mat = GGUF_Q8_0 if quantized else GGUF_F32
    exp = GGUF_Q4_0 if quantized else GGUF_F32
    t = lambda p: p.detach().float().numpy()  # noqa: E731
    stack = lambda experts: np.stack([t(e) for e in experts])  # noqa: E731
    w.tensor("token_embd.weight", t(model.embd), mat)
    w.tensor("output_norm.weight", t(model.out_norm), GGUF_F32)
    for i, L in enumerate(model.layers):
        n = lambda what: f"blk.{i}.{what}.weight"  # noqa: E731
        w.tensor(n("attn_norm"), t(L.attn_norm), GGUF_F32)
        w.tensor(n("attn_q"), t(L.wq), mat)
        w.tensor(n("attn_k"), t(L.wk), mat)
        w.tensor(n("attn_v"), t(L.wv), mat)
        w.tensor(n("attn_output"), t(L.wo), mat)
        w.tensor(n("attn_q_norm"), t(L.q_norm), GGUF_F32)
        w.tensor(n("attn_k_norm"), t(L.k_norm), GGUF_F32)
        w.tensor(n("ffn_norm"), t(L.ffn_norm), GGUF_F32)
        w.tensor(n("ffn_gate_inp"), t(L.router), GGUF_F32)
        w.tensor(n("ffn_gate_exps"), stack(L.gate), exp)
        w.tensor(n("ffn_up_exps"), stack(L.up), exp)
        w.tensor(n("ffn_down_exps"), stack(L.down), exp)
    w.write(path)


# ---- training and evaluation ----------------------------------------------------------


def chunked_ppl(model, ids, ctx):
    """Perplexity as `epq perplexity --ctx ctx` computes it: consecutive chunks of ctx
    tokens, scoring the predictions of positions ctx/2 .. ctx-2 of each."""
    model.eval()
    nll, count = 0.0, 0
    with torch.no_grad():
        chunks = [ids[i:i + ctx] for i in range(0, len(ids) - ctx + 1, ctx)]
        for i in range(0, len(chunks), 8):
            batch = torch.tensor(chunks[i:i + 8])
            logits, _ = model(batch)
            logp = F.log_softmax(logits.double(), -1)
            first = ctx // 2
            target = batch[:, first + 1:]
            nll -= logp[:, first:ctx - 1].gather(-1, target[..., None]).sum().item()
            count += target.numel()
    model.train()
    return math.exp(nll / count), count


def routing_reuse(model, ids, ctx, window=8):
    """Per layer: the share of (token, expert) choices that the previous token also made,
    and that one of the previous `window` tokens made, over chunks of ctx tokens."""
    c = model.c
    hits_prev = np.zeros(c.n_layer)
    hits_window = np.zeros(c.n_layer)
    total = np.zeros(c.n_layer)
    chosen = []

    def record(L, h):
        probs = F.softmax(h @ L.router.t(), dim=-1)
        chosen.append(probs.topk(c.n_expert_used, dim=-1).indices)
        return torch.zeros_like(h), torch.tensor(0.0)

    original = model.moe
    model.moe = lambda L, h: (original(L, h)[0], record(L, h)[1])
    model.eval()
    with torch.no_grad():
        for i in range(0, len(ids) - ctx + 1, ctx):
            chosen.clear()
            model(torch.tensor([ids[i:i + ctx]]))
            for layer, experts in enumerate(chosen):
                sets = [set(row) for row in experts.tolist()]
                for t in range(1, len(sets)):
                    total[layer] += len(sets[t])
                    hits_prev[layer] += len(sets[t] & sets[t - 1])
                    recent = set().union(*sets[max(0, t - window):t])
                    hits_window[layer] += len(sets[t] & recent)
    model.moe = original
    return (hits_prev / total).tolist(), (hits_window / total).tolist()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=50, help="training time budget (default 50)")
    ap.add_argument("--out", default="models/demo")
    ap.add_argument("--epq", help="an epq binary: check tokenization and perplexity against it")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--analyze", action="store_true",
                    help="no training: load --out/model.pt and add the routing reuse of the validation text to report.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    c = Config()
    t0 = time.time()

    verses = kjv_verses()
    n_valid = len(verses) // 50
    train_lines, valid_lines = verses[:-n_valid], verses[-n_valid:]
    valid_text = "\n".join(valid_lines) + "\n"
    with open(os.path.join(args.out, "valid.txt"), "w") as f:
        f.write(valid_text)
    print(f"corpus: {len(verses)} verses ({sum(map(len, verses)) / 1e6:.2f} MB), {n_valid} held out", flush=True)

    bpe = BPE.train(train_lines, c.n_vocab)
    assert len(bpe.tokens) <= c.n_vocab
    c.n_vocab = len(bpe.tokens)
    train_ids = np.array(bpe.encode("\n".join(train_lines) + "\n"), dtype=np.int64)
    valid_ids = bpe.encode(valid_text)
    print(f"tokenizer: {c.n_vocab} tokens; {len(train_ids)} training and {len(valid_ids)} validation tokens "
          f"({time.time() - t0:.0f} s)", flush=True)

    model = Qwen3Moe(c)
    if args.analyze:
        model.load_state_dict(torch.load(os.path.join(args.out, "model.pt")))
        with open(os.path.join(args.out, "report.json")) as f:
            report = json.load(f)
        report["routing_reuse_previous_token"], report["routing_reuse_within_8"] = routing_reuse(model, valid_ids, c.n_ctx)
        with open(os.path.join(args.out, "report.json"), "w") as f:
            json.dump(report, f, indent=1)
        print(json.dumps({k: report[k] for k in ("routing_reuse_previous_token", "routing_reuse_within_8")}, indent=1))
        return
    n_params = sum(p.numel() for p in model.parameters())
    expert_params = sum(p.numel() for L in model.layers for part in (L.gate, L.up, L.down) for p in part)
    print(f"model: {n_params / 1e6:.1f}M parameters ({expert_params / 1e6:.1f}M in routed experts)", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.01)
    batch, ctx = 24, c.n_ctx
    budget = args.minutes * 60
    start = time.time()
    step, warmup, lr_max, lr_min = 0, 100, 3e-3, 2e-4
    losses = []
    rng = np.random.default_rng(args.seed)
    while time.time() - start < budget:
        frac = (time.time() - start) / budget
        lr = lr_max * min(1.0, (step + 1) / warmup) * (lr_min / lr_max + (1 - lr_min / lr_max) * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        offsets = rng.integers(0, len(train_ids) - ctx - 1, batch)
        x = torch.from_numpy(np.stack([train_ids[o:o + ctx] for o in offsets]))
        y = torch.from_numpy(np.stack([train_ids[o + 1:o + ctx + 1] for o in offsets]))
        logits, balance = model(x)
        loss = F.cross_entropy(logits.view(-1, c.n_vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        (loss + 0.01 * balance).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        step += 1
        if step % 50 == 0:
            print(f"step {step}: loss {np.mean(losses[-50:]):.3f}, balance {balance.item():.3f}, lr {lr:.2e}, "
                  f"{(time.time() - start) / 60:.1f} min", flush=True)
    train_minutes = (time.time() - start) / 60
    ppl, scored = chunked_ppl(model, valid_ids, ctx)
    print(f"trained {step} steps ({step * batch * ctx / 1e6:.1f}M tokens) in {train_minutes:.1f} min; "
          f"validation PPL {ppl:.4f} over {scored} positions (PyTorch, float32)", flush=True)

    f32 = os.path.join(args.out, "epq-demo-kjv-f32.gguf")
    q4 = os.path.join(args.out, "epq-demo-kjv-q4.gguf")
    export(model, bpe, f32, quantized=False)
    export(model, bpe, q4, quantized=True)
    torch.save(model.state_dict(), os.path.join(args.out, "model.pt"))
    report = {"corpus": "King James Bible, Debian bible-kjv-text 4.38 via `bible Gen1:1-Rev22:21`",
              "verses": len(verses), "validation_verses": n_valid,
              "train_tokens": int(len(train_ids)), "validation_tokens": len(valid_ids), "n_vocab": c.n_vocab,
              "parameters": n_params, "expert_parameters": expert_params, "steps": step, "batch": batch, "ctx": ctx,
              "train_minutes": round(train_minutes, 2), "threads": args.threads, "final_train_loss": float(np.mean(losses[-100:])),
              "validation_ppl_pytorch": ppl, "validation_positions": scored,
              "files": {os.path.basename(f32): os.path.getsize(f32), os.path.basename(q4): os.path.getsize(q4)}}
    if args.epq:
        got = [int(t) for t in subprocess.run([args.epq, "tokenize", "-m", q4, "-f", os.path.join(args.out, "valid.txt")],
                                              capture_output=True, text=True, check=True).stdout.split()]
        if got != valid_ids:
            sys.exit("epq tokenizes the validation text differently from this script")
        for path in (f32, q4):
            out = subprocess.run([args.epq, "perplexity", "-m", path, "-f", os.path.join(args.out, "valid.txt"), "--ctx", str(ctx)],
                                 capture_output=True, text=True, check=True).stdout
            report["validation_ppl_epq_" + ("f32" if path == f32 else "q4")] = float(re.search(r"PPL = ([\d.]+)", out).group(1))
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
