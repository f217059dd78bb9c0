"""DLPack round trip: every tensor of the views and dtypes fixtures, exported through the C API
(pthload_tensor_to_dlpack) as a PyCapsule, imported by numpy.from_dlpack without a copy, must
show exactly what pthload's C++ view shows (pthload_tensor_copy: Tensor::contiguous_bytes),
with the same shape, strides and first-element address, and stay valid after the checkpoint is
freed (the capsule holds the storage). Needs numpy (Debian's python3-numpy); torch is not used.

usage: dlpack_numpy_test.py LIBPTHLOAD_SO FIXTURES_DIR
"""
import ctypes
import pathlib
import sys

from dlpack_ctypes import Capsule, bind, capsule_of, check_fixtures

try:
    import numpy as np
except ImportError:
    print("numpy is not installed (Debian: python3-numpy): skipped")
    sys.exit(77)

FIXTURES = ["views", "dtypes", "tied", "legacy_views"]
# dtypes numpy has no type for: from_dlpack must refuse them, not misread them.
NOT_IN_NUMPY = {"bfloat16", "complex32"}


def check_fixture(lib, checkpoint_path):
    failures, exported = [], 0
    checkpoint = ctypes.c_void_p()
    code = lib.pthload_load(str(checkpoint_path).encode(), None, ctypes.byref(checkpoint))
    if code != 0:
        return [f"{checkpoint_path}: pthload_load returned {code}"], 0
    views = []
    for i in range(lib.pthload_checkpoint_tensor_count(checkpoint)):
        tensor = lib.pthload_checkpoint_tensor(checkpoint, i)
        name = lib.pthload_tensor_name(tensor).decode()
        dtype = lib.pthload_dtype_name(lib.pthload_tensor_dtype(tensor)).decode()
        ndim = lib.pthload_tensor_ndim(tensor)
        shape = tuple(lib.pthload_tensor_shape(tensor)[d] for d in range(ndim))
        strides = tuple(lib.pthload_tensor_strides(tensor)[d] for d in range(ndim))
        item = lib.pthload_dtype_size(lib.pthload_tensor_dtype(tensor))
        where = f"{checkpoint_path.parent.name}/{checkpoint_path.name}: {name} ({dtype})"
        managed = ctypes.c_void_p()
        if lib.pthload_tensor_to_dlpack(tensor, ctypes.byref(managed)) != 0:
            if dtype in ("float16", "float32", "float64", "int64", "uint8", "bool"):
                failures.append(f"{where}: not exported")
            continue
        holder = Capsule(capsule_of(managed.value), (1, 0))
        if dtype in NOT_IN_NUMPY:
            try:
                np.from_dlpack(holder)
                failures.append(f"{where}: numpy accepted a dtype it has not")
            except (BufferError, TypeError, RuntimeError, ValueError):
                pass
            continue
        array = np.from_dlpack(holder)
        expected = ctypes.create_string_buffer(max(1, lib.pthload_tensor_nbytes(tensor)))
        if lib.pthload_tensor_copy(tensor, expected, len(expected)) != 0:
            failures.append(f"{where}: pthload_tensor_copy failed")
            continue
        if array.shape != shape:
            failures.append(f"{where}: shape {array.shape}, pthload {shape}")
        if array.strides != tuple(s * item for s in strides):
            failures.append(f"{where}: strides {array.strides}, pthload {strides} x {item}")
        if array.__array_interface__["data"][0] != (lib.pthload_tensor_data(tensor) or 0):
            failures.append(f"{where}: numpy's array is not pthload's bytes (a copy?)")
        views.append((where, array, expected.raw[: lib.pthload_tensor_nbytes(tensor)]))
        exported += 1
    # The arrays hold their storages: freeing the checkpoint must leave them readable.
    lib.pthload_checkpoint_free(checkpoint)
    for where, array, expected in views:
        if array.tobytes() != expected:
            failures.append(f"{where}: numpy shows {array.tobytes().hex()}, pthload {expected.hex()}")
    return failures, exported


def main() -> int:
    lib = bind(sys.argv[1])
    fixtures_dir = pathlib.Path(sys.argv[2])
    failures, exported = check_fixtures(fixtures_dir, FIXTURES,
                                        lambda path: check_fixture(lib, path))
    for failure in failures:
        print("FAIL", failure)
    print(f"{exported} tensors imported by numpy {np.__version__} through DLPack")
    if exported < 100:
        print("FAIL: fewer tensors than the fixtures hold")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
