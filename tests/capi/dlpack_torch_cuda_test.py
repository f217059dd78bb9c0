"""DLPack onto a GPU: the torch fixtures loaded onto cuda:0 through the C API (map_to "cuda:0"),
each tensor exported with pthload_tensor_to_dlpack and imported by torch.from_dlpack without a
copy, must be a CUDA tensor on device 0 at pthload's device address, with pthload's shape and
strides, holding what torch.load(map_location="cuda:0") of the same file holds for that name,
and stay readable after the checkpoint is freed (the capsule holds the device memory). Tensors
are matched to torch's by the order of a walk of torch.load's result over dicts, lists and
tuples, the way pthload names them; files holding objects that walk cannot enter are compared
with pthload's own CPU load instead.

Needs torch and a CUDA GPU: without either it exits 77 (meson: skipped), so CI (no GPU) skips it
and a GPU machine runs it (scripts/gpu-check).

usage: dlpack_torch_cuda_test.py LIBPTHLOAD_SO FIXTURES_DIR
"""
import ctypes
import pathlib
import sys

from dlpack_ctypes import Capsule, bind, capsule_of, check_fixtures

try:
    import torch
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)
if not torch.cuda.is_available():
    print("no CUDA GPU visible to torch: skipped")
    sys.exit(77)

FIXTURES = ["views", "dtypes", "tied", "containers", "nested", "optimizer", "misc", "module",
            "legacy_views", "legacy_tied", "cuda"]
K_DL_CUDA = 2


def load(lib, path, device):
    # pthload_options as a binding that does not declare the struct sees it: bytes, set up by
    # pthload_options_init_sized (the bytes past the library's fields stay zero: accepted), then
    # map_to, the field after struct_size.
    options = ctypes.create_string_buffer(4096)
    assert lib.pthload_options_init_sized(options, len(options)) == 0
    device_name = ctypes.create_string_buffer(device.encode())
    map_to_offset = ctypes.sizeof(ctypes.c_size_t)
    ctypes.c_void_p.from_buffer(options, map_to_offset).value = ctypes.addressof(device_name)
    checkpoint = ctypes.c_void_p()
    code = lib.pthload_load(str(path).encode(), options, ctypes.byref(checkpoint))
    return code, checkpoint


def torch_tensors(obj, prefix=""):
    """(name, tensor) in the order pthload names them, or None where a value is opaque."""
    if isinstance(obj, torch.Tensor):
        return [(prefix, obj)]
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    elif isinstance(obj, (int, float, str, bool, bytes, type(None), torch.Size, torch.dtype)):
        return []
    else:
        return None
    found = []
    for key, value in items:
        more = torch_tensors(value, f"{prefix}.{key}" if prefix else str(key))
        if more is None:
            return None
        found += more
    return found


def raw(tensor):
    """The elements in row-major order as bytes."""
    flat = tensor.detach().contiguous().cpu().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


compared_with_torch = [0]


def check_fixture(lib, path):
    failures, imported = [], 0
    code, on_cpu = load(lib, path, "cpu")
    if code != 0:
        return [], 0  # a file pthload refuses on the CPU too
    code, on_gpu = load(lib, path, "cuda:0")
    if code != 0:
        lib.pthload_checkpoint_free(on_cpu)
        return [f"{path}: pthload_load onto cuda:0 returned {code}"], 0
    try:
        reference = torch.load(path, map_location="cuda:0", weights_only=False)
        by_torch = dict(torch_tensors(reference) or [])
    except Exception:  # noqa: BLE001: torch refuses some fixtures (legacy v3 storages)
        by_torch = {}
    count = lib.pthload_checkpoint_tensor_count(on_gpu)
    kept = []
    for i in range(count):
        tensor = lib.pthload_checkpoint_tensor(on_gpu, i)
        cpu_tensor = lib.pthload_checkpoint_tensor(on_cpu, i)
        name = lib.pthload_tensor_name(tensor).decode()
        dtype = lib.pthload_dtype_name(lib.pthload_tensor_dtype(tensor)).decode()
        where = f"{path.parent.name}/{path.name}: {name} ({dtype})"
        managed = ctypes.c_void_p()
        if lib.pthload_tensor_to_dlpack(tensor, ctypes.byref(managed)) != 0:
            continue  # no DLPack form (quantized, float8, packed) or not on the GPU
        pointer = lib.pthload_tensor_device_pointer(tensor)
        if pointer is None:
            # A storage that stays on the CPU (numpy arrays do, as in torch).
            torch.from_dlpack(Capsule(capsule_of(managed.value), (1, 0)))  # frees it
            continue
        try:
            imported_tensor = torch.from_dlpack(Capsule(capsule_of(managed.value), (K_DL_CUDA, 0)))
        except (BufferError, TypeError, RuntimeError, ValueError) as e:
            failures.append(f"{where}: torch.from_dlpack refused it: {e}")
            continue
        ndim = lib.pthload_tensor_ndim(tensor)
        shape = tuple(lib.pthload_tensor_shape(tensor)[d] for d in range(ndim))
        strides = tuple(lib.pthload_tensor_strides(tensor)[d] for d in range(ndim))
        if imported_tensor.device != torch.device("cuda", 0):
            failures.append(f"{where}: on {imported_tensor.device}")
        if tuple(imported_tensor.shape) != shape or imported_tensor.stride() != strides:
            failures.append(f"{where}: shape {tuple(imported_tensor.shape)} stride "
                            f"{imported_tensor.stride()}, pthload {shape} {strides}")
        if imported_tensor.numel() > 0 and imported_tensor.data_ptr() != pointer:
            failures.append(f"{where}: torch's tensor is not pthload's device memory (a copy?)")
        expected = ctypes.create_string_buffer(max(1, lib.pthload_tensor_nbytes(cpu_tensor)))
        if lib.pthload_tensor_copy(cpu_tensor, expected, len(expected)) != 0:
            failures.append(f"{where}: pthload_tensor_copy of the CPU load failed")
            continue
        kept.append((where, name, imported_tensor, expected.raw[: lib.pthload_tensor_nbytes(cpu_tensor)]))
        imported += 1
    # The torch tensors hold pthload's device memory: freeing both checkpoints must leave it.
    lib.pthload_checkpoint_free(on_gpu)
    lib.pthload_checkpoint_free(on_cpu)
    torch.cuda.synchronize()
    for where, name, imported_tensor, expected in kept:
        if raw(imported_tensor) != expected:
            failures.append(f"{where}: the GPU tensor differs from pthload's CPU load")
        theirs = by_torch.get(name)
        if theirs is not None and theirs.is_cuda and theirs.dtype == imported_tensor.dtype:
            if raw(theirs) != raw(imported_tensor):
                failures.append(f"{where}: differs from torch.load(map_location='cuda:0')")
            if theirs.stride() != imported_tensor.stride():
                failures.append(f"{where}: stride {imported_tensor.stride()}, torch {theirs.stride()}")
            compared_with_torch[0] += 1
    return failures, imported


def main() -> int:
    lib = bind(sys.argv[1])
    fixtures_dir = pathlib.Path(sys.argv[2])
    failures, imported = check_fixtures(fixtures_dir, FIXTURES,
                                        lambda path: check_fixture(lib, path))
    for failure in failures:
        print("FAIL", failure)
    print(f"{imported} CUDA tensors imported by torch {torch.__version__} through DLPack "
          f"on {torch.cuda.get_device_name(0)}, {compared_with_torch[0]} of them compared with "
          "torch.load's own")
    if imported < 50 or compared_with_torch[0] < 25:
        print("FAIL: fewer tensors than the fixtures hold")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
