"""Rewrites one metadata value of a GGUF file (adding the key if it is missing), keeping
the tensors: the header is rebuilt and the data section re-aligned, so values may change
type and size. For tests that need models whose metadata lies about their tensors."""
import struct

UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = 4, 5, 6, 7, 8, 9, 10, 11, 12
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_FORMATS = {UINT32: "<I", INT32: "<i", FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}


def _skip_value(buf, pos, vtype):
    if vtype == STRING:
        return pos + 8 + struct.unpack_from("<Q", buf, pos)[0]
    if vtype == ARRAY:
        elem, n = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if elem in _SIZES:
            return pos + n * _SIZES[elem]
        for _ in range(n):
            pos = _skip_value(buf, pos, elem)
        return pos
    return pos + _SIZES[vtype]


def _encode(vtype, value):
    """value: a number, a str or bytes (STRING), or (element type, count, raw bytes) (ARRAY)."""
    if vtype == ARRAY:
        elem, count, raw = value
        return struct.pack("<IQ", elem, count) + raw
    if vtype == STRING:
        data = value.encode() if isinstance(value, str) else value
        return struct.pack("<Q", len(data)) + data
    return struct.pack(_FORMATS[vtype], value)


def set_metadata(src, dst, key, vtype, value):
    with open(src, "rb") as f:
        buf = f.read()
    n_tensors, n_kv = struct.unpack_from("<QQ", buf, 8)
    pos, kvs, alignment, found = 24, [], 32, False
    for _ in range(n_kv):
        start = pos
        klen = struct.unpack_from("<Q", buf, pos)[0]
        name = buf[pos + 8:pos + 8 + klen].decode()
        vt = struct.unpack_from("<I", buf, pos + 8 + klen)[0]
        pos = _skip_value(buf, pos + 12 + klen, vt)
        if name == "general.alignment":
            alignment = struct.unpack_from("<I", buf, pos - 4)[0]
        if name == key:
            found = True
            kvs.append(struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", vtype) + _encode(vtype, value))
        else:
            kvs.append(buf[start:pos])
    if not found:
        kvs.append(struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", vtype) + _encode(vtype, value))
    tensors_start = pos
    for _ in range(n_tensors):
        nlen = struct.unpack_from("<Q", buf, pos)[0]
        n_dims = struct.unpack_from("<I", buf, pos + 8 + nlen)[0]
        pos += 8 + nlen + 4 + 8 * n_dims + 4 + 8
    tensor_infos = buf[tensors_start:pos]
    data_start = (pos + alignment - 1) // alignment * alignment
    header = buf[:8] + struct.pack("<QQ", n_tensors, len(kvs)) + b"".join(kvs) + tensor_infos
    header += b"\0" * ((-len(header)) % alignment)
    with open(dst, "wb") as f:
        f.write(header)
        f.write(buf[data_start:])
    return dst
