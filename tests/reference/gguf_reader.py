"""A small, independent GGUF reader (versions 2 and 3, little-endian).

Written from the public GGUF format description, for the numpy reference model. It
reads the header, metadata and tensor index, and maps tensor bytes with numpy.memmap.

    f = GGUFFile("model.gguf")
    f.metadata["general.architecture"]      # -> "qwen3moe"
    info = f.tensors["blk.0.attn_q.weight"]  # -> TensorInfo(name, dims, type, offset)
    raw = f.tensor_bytes(info.name)          # -> uint8 array (a view of the mapped file)
"""
import struct
from dataclasses import dataclass

import numpy as np

from dequant import tensor_nbytes

# Metadata value types.
GGUF_UINT8, GGUF_INT8, GGUF_UINT16, GGUF_INT16 = 0, 1, 2, 3
GGUF_UINT32, GGUF_INT32, GGUF_FLOAT32, GGUF_BOOL = 4, 5, 6, 7
GGUF_STRING, GGUF_ARRAY, GGUF_UINT64, GGUF_INT64, GGUF_FLOAT64 = 8, 9, 10, 11, 12

# Scalar value types -> struct format character.
_SCALAR_FORMATS = {
    GGUF_UINT8: "B", GGUF_INT8: "b", GGUF_UINT16: "H", GGUF_INT16: "h",
    GGUF_UINT32: "I", GGUF_INT32: "i", GGUF_FLOAT32: "f", GGUF_BOOL: "?",
    GGUF_UINT64: "Q", GGUF_INT64: "q", GGUF_FLOAT64: "d",
}
# Scalar value types -> numpy dtype, for reading long arrays in one go.
_SCALAR_DTYPES = {
    GGUF_UINT8: "<u1", GGUF_INT8: "<i1", GGUF_UINT16: "<u2", GGUF_INT16: "<i2",
    GGUF_UINT32: "<u4", GGUF_INT32: "<i4", GGUF_FLOAT32: "<f4", GGUF_BOOL: "?",
    GGUF_UINT64: "<u8", GGUF_INT64: "<i8", GGUF_FLOAT64: "<f8",
}

DEFAULT_ALIGNMENT = 32


@dataclass
class TensorInfo:
    name: str
    dims: tuple      # ne0 (fastest-varying) first
    type: int        # ggml type id
    offset: int      # relative to the start of the data section

    @property
    def n_elements(self):
        n = 1
        for d in self.dims:
            n *= d
        return n


class _Cursor:
    """Sequential little-endian reads over a bytes-like buffer."""

    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.buf):
            raise ValueError(f"GGUF: read of {n} bytes at {self.pos} runs past the end")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def scalar(self, fmt):
        size = struct.calcsize("<" + fmt)
        return struct.unpack("<" + fmt, self.take(size))[0]

    def string(self):
        n = self.scalar("Q")
        return bytes(self.take(n)).decode("utf-8")

    def value(self, vtype):
        if vtype == GGUF_STRING:
            return self.string()
        if vtype == GGUF_ARRAY:
            elem_type = self.scalar("I")
            count = self.scalar("Q")
            if elem_type in _SCALAR_DTYPES:
                dtype = np.dtype(_SCALAR_DTYPES[elem_type])
                raw = self.take(count * dtype.itemsize)
                return np.frombuffer(raw, dtype=dtype).tolist()
            return [self.value(elem_type) for _ in range(count)]
        if vtype in _SCALAR_FORMATS:
            return self.scalar(_SCALAR_FORMATS[vtype])
        raise ValueError(f"GGUF: unknown metadata value type {vtype}")


class GGUFFile:
    def __init__(self, path):
        self.path = path
        self.mm = np.memmap(path, dtype=np.uint8, mode="r")
        cur = _Cursor(memoryview(self.mm))
        magic = bytes(cur.take(4))
        if magic != b"GGUF":
            raise ValueError(f"{path}: bad magic {magic!r}")
        self.version = cur.scalar("I")
        if self.version not in (2, 3):
            raise ValueError(f"{path}: unsupported GGUF version {self.version}")
        n_tensors = cur.scalar("Q")
        n_kv = cur.scalar("Q")

        self.metadata = {}
        for _ in range(n_kv):
            key = cur.string()
            vtype = cur.scalar("I")
            self.metadata[key] = cur.value(vtype)

        self.tensors = {}
        for _ in range(n_tensors):
            name = cur.string()
            n_dims = cur.scalar("I")
            dims = tuple(cur.scalar("q") for _ in range(n_dims))
            ttype = cur.scalar("I")
            offset = cur.scalar("Q")
            self.tensors[name] = TensorInfo(name, dims, ttype, offset)

        alignment = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        self.data_offset = (cur.pos + alignment - 1) // alignment * alignment

    def tensor_bytes(self, name):
        """The raw bytes of a tensor, as a uint8 view of the mapped file."""
        info = self.tensors[name]
        start = self.data_offset + info.offset
        nbytes = tensor_nbytes(info.type, info.n_elements)
        if start + nbytes > len(self.mm):
            raise ValueError(f"{self.path}: tensor {name} extends past the end of the file")
        return self.mm[start:start + nbytes]
