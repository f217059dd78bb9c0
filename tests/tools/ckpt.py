"""Writes small torch.save-style zip checkpoints by hand (no torch): the tests of pthinspect's
commands need tensors with known values in every dtype, and a way to wrap bytes a command wrote
(an exported tensor) back into a checkpoint that `pthinspect ls --checksum` hashes."""
import io
import struct
import zipfile

STORAGE = {  # dtype name -> (storage class, element size)
    "float64": ("DoubleStorage", 8), "float32": ("FloatStorage", 4), "float16": ("HalfStorage", 2),
    "bfloat16": ("BFloat16Storage", 2), "int64": ("LongStorage", 8), "int32": ("IntStorage", 4),
    "int16": ("ShortStorage", 2), "int8": ("CharStorage", 1), "uint8": ("ByteStorage", 1),
    "bool": ("BoolStorage", 1), "complex64": ("ComplexFloatStorage", 8),
    "complex128": ("ComplexDoubleStorage", 16), "uint16": ("UInt16Storage", 2),
    "uint32": ("UInt32Storage", 4), "uint64": ("UInt64Storage", 8),
    "float8_e4m3fn": ("Float8_e4m3fnStorage", 1), "float8_e5m2": ("Float8_e5m2Storage", 1),
    "float8_e4m3fnuz": ("Float8_e4m3fnuzStorage", 1),
    "float8_e5m2fnuz": ("Float8_e5m2fnuzStorage", 1),
}
# safetensors' names (its spec) -> torch's.
SAFETENSORS = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
               "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
               "BOOL": "bool", "C64": "complex64", "U16": "uint16", "U32": "uint32",
               "U64": "uint64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
               "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz"}


def _uni(s):
    b = s.encode("utf-8", "surrogatepass")  # as CPython's pickler writes a lone surrogate
    return b"X" + struct.pack("<I", len(b)) + b


def _int(n):
    return b"J" + struct.pack("<i", n)


def _tuple(items):
    return b"(" + b"".join(_int(i) for i in items) + b"t"


def checkpoint(tensors, storages):
    """tensors: [(name, storage key, offset, shape, stride)]; storages: {key: (dtype, bytes)}.
    Returns the bytes of a zip checkpoint as torch.save (protocol 2) writes one."""
    body = b"\x80\x02}("
    for name, key, offset, shape, stride in tensors:
        dtype, data = storages[key]
        cls, size = STORAGE[dtype]
        pid = (b"(" + _uni("storage") + b"ctorch\n" + cls.encode() + b"\n" + _uni(key) +
               _uni("cpu") + _int(len(data) // size) + b"tQ")
        body += (_uni(name) + b"ctorch._utils\n_rebuild_tensor_v2\n(" + pid + _int(offset) +
                 _tuple(shape) + _tuple(stride) + b"\x89ccollections\nOrderedDict\n)RtR")
    body += b"u."
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr(zipfile.ZipInfo("archive/data.pkl", (2020, 1, 1, 0, 0, 0)), body)
        for key, (_, data) in storages.items():
            z.writestr(zipfile.ZipInfo(f"archive/data/{key}", (2020, 1, 1, 0, 0, 0)), data)
        z.writestr(zipfile.ZipInfo("archive/version", (2020, 1, 1, 0, 0, 0)), b"3\n")
    return out.getvalue()


def contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.insert(0, step)
        step *= max(size, 1)
    return strides


def read_safetensors(path):
    """(header dict, data bytes) of a safetensors file, checking the layout the spec requires."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    text = blob[8:8 + n]
    assert (8 + n) % 8 == 0, f"{path}: data starts at {8 + n}, not 8-byte aligned"
    assert text.startswith(b"{"), f"{path}: header does not start with '{{'"
    import json
    return json.loads(text.decode()), blob[8 + n:]
