"""Dequantization of ggml tensor types to float32, vectorized with numpy.

Written independently from the public block layouts (see the comments on each
function). Every function takes the raw bytes of whole blocks as a uint8 array of
shape (n_blocks, block_bytes) and returns float32 values of shape
(n_blocks, block_elements). `dequantize(raw, type, n)` is the entry point.
"""
import numpy as np

# ggml type ids
F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 = 0, 1, 2, 3, 6, 7, 8
Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K = 10, 11, 12, 13, 14, 15
IQ4_NL, IQ4_XS, BF16, MXFP4 = 20, 23, 30, 39

TYPE_NAMES = {
    F32: "F32", F16: "F16", Q4_0: "Q4_0", Q4_1: "Q4_1", Q5_0: "Q5_0", Q5_1: "Q5_1",
    Q8_0: "Q8_0", Q2_K: "Q2_K", Q3_K: "Q3_K", Q4_K: "Q4_K", Q5_K: "Q5_K", Q6_K: "Q6_K",
    Q8_K: "Q8_K", IQ4_NL: "IQ4_NL", IQ4_XS: "IQ4_XS", BF16: "BF16", MXFP4: "MXFP4",
}

# type -> (elements per block, bytes per block)
BLOCK = {
    F32: (1, 4), F16: (1, 2), BF16: (1, 2),
    Q4_0: (32, 18), Q4_1: (32, 20), Q5_0: (32, 22), Q5_1: (32, 24), Q8_0: (32, 34),
    IQ4_NL: (32, 18), MXFP4: (32, 17),
    Q2_K: (256, 84), Q3_K: (256, 110), Q4_K: (256, 144), Q5_K: (256, 176),
    Q6_K: (256, 210), Q8_K: (256, 292), IQ4_XS: (256, 136),
}

# The non-linear 4-bit codebook of IQ4_NL and IQ4_XS.
IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10,
                       1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)
# FP4 (E2M1) values, doubled; paired with a scale of 2**(e - 128).
MXFP4_VALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12],
                        dtype=np.float32)


def tensor_nbytes(ttype, n_elements):
    elems, nbytes = BLOCK[ttype]
    if n_elements % elems:
        raise ValueError(f"{TYPE_NAMES[ttype]}: {n_elements} elements is not a whole "
                         "number of blocks")
    return n_elements // elems * nbytes


# ---- field readers: a little-endian field at a byte offset of every block ----

def _f16(blocks, off):
    return blocks[:, off:off + 2].copy().view("<f2")[:, 0].astype(np.float32)


def _f32(blocks, off):
    return blocks[:, off:off + 4].copy().view("<f4")[:, 0]


def _u16(blocks, off):
    return blocks[:, off:off + 2].copy().view("<u2")[:, 0].astype(np.int32)


def _u32(blocks, off):
    return blocks[:, off:off + 4].copy().view("<u4")[:, 0].astype(np.int64)


def _nibbles_32(qs):
    """(nb, 16) bytes -> (nb, 32) codes: low nibble of qs[j] is element j, high j+16."""
    return np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int32)


def _five_bit_32(blocks, qh_off, qs_off):
    """Q5_0/Q5_1 codes: a nibble plus bit j of the 32-bit qh for element j."""
    h = _u32(blocks, qh_off)
    low = _nibbles_32(blocks[:, qs_off:qs_off + 16])
    high = (h[:, None] >> np.arange(32)) & 1
    return low | (high << 4).astype(np.int32)


# ---- 32-element formats ----

def deq_q4_0(b):  # f16 d; qs[16]
    d = _f16(b, 0)
    return (_nibbles_32(b[:, 2:18]) - 8).astype(np.float32) * d[:, None]


def deq_q4_1(b):  # f16 d; f16 m; qs[16]
    d, m = _f16(b, 0), _f16(b, 2)
    return _nibbles_32(b[:, 4:20]).astype(np.float32) * d[:, None] + m[:, None]


def deq_q5_0(b):  # f16 d; qh[4]; qs[16]
    d = _f16(b, 0)
    return (_five_bit_32(b, 2, 6) - 16).astype(np.float32) * d[:, None]


def deq_q5_1(b):  # f16 d; f16 m; qh[4]; qs[16]
    d, m = _f16(b, 0), _f16(b, 2)
    return _five_bit_32(b, 4, 8).astype(np.float32) * d[:, None] + m[:, None]


def deq_q8_0(b):  # f16 d; int8 qs[32]
    d = _f16(b, 0)
    return b[:, 2:34].view(np.int8).astype(np.float32) * d[:, None]


def deq_iq4_nl(b):  # f16 d; qs[16]
    d = _f16(b, 0)
    return IQ4_VALUES[_nibbles_32(b[:, 2:18])] * d[:, None]


def deq_mxfp4(b):  # u8 e; qs[16]
    e = b[:, 0].astype(np.int32)
    scale = np.ldexp(np.float32(1.0), e - 128).astype(np.float32)  # exact, incl. subnormals
    return MXFP4_VALUES[_nibbles_32(b[:, 1:17])] * scale[:, None]


# ---- 256-element (K) formats ----

def deq_q8_k(b):  # f32 d; int8 qs[256]; int16 bsums[16]
    d = _f32(b, 0)
    return b[:, 4:260].view(np.int8).astype(np.float32) * d[:, None]


def _k_scales_mins(scales):
    """Q4_K/Q5_K: 12 bytes -> eight 6-bit scales and eight 6-bit mins, (nb, 8) each."""
    s = scales.astype(np.int32)
    sc = np.empty((s.shape[0], 8), np.int32)
    mn = np.empty((s.shape[0], 8), np.int32)
    sc[:, :4] = s[:, 0:4] & 63
    mn[:, :4] = s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)
    mn[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc, mn


def _k_nibbles(qs):
    """Q4_K/Q5_K: (nb, 128) bytes -> (nb, 8, 32) codes by sub-block.

    Chunk c (32 bytes) holds sub-block 2c in its low nibbles, 2c+1 in its high ones."""
    q = qs.reshape(-1, 4, 1, 32)
    return np.concatenate([q & 15, q >> 4], axis=2).reshape(-1, 8, 32).astype(np.int32)


def _k_combine(d, dmin, sc, mn, q):
    """y = d*sc*q - dmin*m per sub-block, in float32 as the scales are formed."""
    d1 = (d[:, None] * sc.astype(np.float32))[:, :, None]
    m1 = (dmin[:, None] * mn.astype(np.float32))[:, :, None]
    return (d1 * q.astype(np.float32) - m1).reshape(-1, 256)


def deq_q4_k(b):  # f16 d; f16 dmin; scales[12]; qs[128]
    d, dmin = _f16(b, 0), _f16(b, 2)
    sc, mn = _k_scales_mins(b[:, 4:16])
    return _k_combine(d, dmin, sc, mn, _k_nibbles(b[:, 16:144]))


def deq_q5_k(b):  # f16 d; f16 dmin; scales[12]; qh[32]; qs[128]
    d, dmin = _f16(b, 0), _f16(b, 2)
    sc, mn = _k_scales_mins(b[:, 4:16])
    q = _k_nibbles(b[:, 48:176])
    qh = b[:, 16:48].astype(np.int32)
    # Sub-block s (= 2c or 2c+1) takes its fifth bit from bit s of qh[l].
    high = (qh[:, None, :] >> np.arange(8)[None, :, None]) & 1
    return _k_combine(d, dmin, sc, mn, q + 16 * high)


def deq_q6_k(b):  # ql[128]; qh[64]; int8 scales[16]; f16 d
    ql = b[:, 0:128].astype(np.int32).reshape(-1, 2, 64)   # by half
    qh = b[:, 128:192].astype(np.int32).reshape(-1, 2, 32)
    sc = b[:, 192:208].view(np.int8).astype(np.float32)
    d = _f16(b, 208)
    q = np.empty((b.shape[0], 2, 128), np.int32)
    q[:, :, 0:32] = (ql[:, :, 0:32] & 15) | (((qh >> 0) & 3) << 4)
    q[:, :, 32:64] = (ql[:, :, 32:64] & 15) | (((qh >> 2) & 3) << 4)
    q[:, :, 64:96] = (ql[:, :, 0:32] >> 4) | (((qh >> 4) & 3) << 4)
    q[:, :, 96:128] = (ql[:, :, 32:64] >> 4) | (((qh >> 6) & 3) << 4)
    q = (q - 32).reshape(-1, 16, 16)                        # element i -> scale i // 16
    d1 = (d[:, None] * sc)[:, :, None]
    return (d1 * q.astype(np.float32)).reshape(-1, 256)


def _two_bit_codes(qs):
    """Q2_K/Q3_K: (nb, 64) bytes -> (nb, 256) 2-bit codes.

    Element 128h + 32j + l is bits 2j..2j+1 of qs[32h + l]."""
    q = qs.astype(np.int32).reshape(-1, 2, 1, 32)
    shifts = (2 * np.arange(4)).reshape(1, 1, 4, 1)
    return ((q >> shifts) & 3).reshape(-1, 256)


def deq_q2_k(b):  # scales[16]; qs[64]; f16 d; f16 dmin
    sc, mn = b[:, 0:16] & 15, b[:, 0:16] >> 4   # sub-block s = i // 16
    d, dmin = _f16(b, 80), _f16(b, 82)
    q = _two_bit_codes(b[:, 16:80]).reshape(-1, 16, 16)
    d1 = (d[:, None] * sc.astype(np.float32))[:, :, None]
    m1 = (dmin[:, None] * mn.astype(np.float32))[:, :, None]
    return (d1 * q.astype(np.float32) - m1).reshape(-1, 256)


def deq_q3_k(b):  # hmask[32]; qs[64]; scales[12]; f16 d
    hmask = b[:, 0:32].astype(np.int32).reshape(-1, 1, 1, 32)
    low = _two_bit_codes(b[:, 32:96])
    hshift = (4 * np.arange(2).reshape(1, 2, 1, 1) + np.arange(4).reshape(1, 1, 4, 1))
    hbit = ((hmask >> hshift) & 1).reshape(-1, 256)
    value = low - 4 * (1 - hbit)
    sb = b[:, 96:108].astype(np.int32)
    low4 = np.concatenate([sb[:, 0:8] & 15, sb[:, 0:8] >> 4], axis=1)      # s < 8, s >= 8
    s_idx = np.arange(16)
    high2 = (sb[:, 8 + s_idx % 4] >> (2 * (s_idx // 4))) & 3
    sc = (low4 | (high2 << 4)) - 32
    d = _f16(b, 108)
    d1 = (d[:, None] * sc.astype(np.float32))[:, :, None]
    return (d1 * value.reshape(-1, 16, 16).astype(np.float32)).reshape(-1, 256)


def deq_iq4_xs(b):  # f16 d; u16 scales_h; u8 scales_l[4]; qs[128]
    d = _f16(b, 0)
    scales_h = _u16(b, 2)
    scales_l = b[:, 4:8].astype(np.int32)
    s = np.arange(8)
    ls = ((scales_l[:, s // 2] >> (4 * (s % 2))) & 15) | (((scales_h[:, None] >> (2 * s)) & 3) << 4)
    dl = d[:, None] * (ls - 32).astype(np.float32)                         # (nb, 8)
    qs = b[:, 8:136].reshape(-1, 8, 1, 16)
    codes = np.concatenate([qs & 15, qs >> 4], axis=2).reshape(-1, 8, 32)
    return (dl[:, :, None] * IQ4_VALUES[codes]).reshape(-1, 256)


# ---- float formats ----

def deq_f32(b):
    return b.reshape(-1).view("<f4").reshape(-1, 1)


def deq_f16(b):
    return b.reshape(-1).view("<f2").astype(np.float32).reshape(-1, 1)


def deq_bf16(b):
    bits = b.reshape(-1).view("<u2").astype(np.uint32) << 16
    return bits.view(np.float32).reshape(-1, 1)


_DEQUANT = {
    F32: deq_f32, F16: deq_f16, BF16: deq_bf16,
    Q4_0: deq_q4_0, Q4_1: deq_q4_1, Q5_0: deq_q5_0, Q5_1: deq_q5_1, Q8_0: deq_q8_0,
    IQ4_NL: deq_iq4_nl, MXFP4: deq_mxfp4,
    Q2_K: deq_q2_k, Q3_K: deq_q3_k, Q4_K: deq_q4_k, Q5_K: deq_q5_k, Q6_K: deq_q6_k,
    Q8_K: deq_q8_k, IQ4_XS: deq_iq4_xs,
}


def dequantize(raw, ttype, n_elements):
    """Raw tensor bytes (uint8) -> flat float32 array of n_elements values."""
    if ttype not in _DEQUANT:
        raise ValueError(f"unsupported ggml type {ttype}")
    elems, nbytes = BLOCK[ttype]
    n_blocks = n_elements // elems
    blocks = np.ascontiguousarray(np.asarray(raw, dtype=np.uint8)[:n_blocks * nbytes])
    out = _DEQUANT[ttype](blocks.reshape(n_blocks, nbytes))
    return np.ascontiguousarray(out, dtype=np.float32).reshape(-1)
