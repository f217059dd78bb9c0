"""The C API through ctypes, for the DLPack tests: pthload's functions with their signatures, and
DLPack capsules as the importers (numpy.from_dlpack, torch.from_dlpack) ask for them."""
import ctypes


class Capsule:
    """What from_dlpack asks for: an object with __dlpack__ and __dlpack_device__."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def bind(path):
    """libpthload at `path`, with argument and result types set on the functions the tests use."""
    lib = ctypes.CDLL(path)
    p, vp, u64, sz = ctypes.POINTER, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t
    for name, restype, argtypes in [
        ("pthload_options_init_sized", ctypes.c_int, [vp, sz]),
        ("pthload_load", ctypes.c_int, [ctypes.c_char_p, vp, p(vp)]),
        ("pthload_checkpoint_free", None, [vp]),
        ("pthload_checkpoint_tensor_count", sz, [vp]),
        ("pthload_checkpoint_tensor", vp, [vp, sz]),
        ("pthload_tensor_name", ctypes.c_char_p, [vp]),
        ("pthload_tensor_dtype", ctypes.c_int, [vp]),
        ("pthload_dtype_name", ctypes.c_char_p, [ctypes.c_int]),
        ("pthload_dtype_size", sz, [ctypes.c_int]),
        ("pthload_tensor_ndim", sz, [vp]),
        ("pthload_tensor_shape", p(ctypes.c_int64), [vp]),
        ("pthload_tensor_strides", p(ctypes.c_int64), [vp]),
        ("pthload_tensor_nbytes", u64, [vp]),
        ("pthload_tensor_data", vp, [vp]),
        ("pthload_tensor_device_pointer", vp, [vp]),
        ("pthload_tensor_copy", ctypes.c_int, [vp, vp, sz]),
        ("pthload_tensor_to_dlpack", ctypes.c_int, [vp, p(vp)]),
    ]:
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    return lib


def capsule_of(pointer):
    """A PyCapsule named "dltensor" around a DLManagedTensor*."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(pointer, b"dltensor", None)


def check_fixtures(fixtures_dir, names, check_fixture):
    """check_fixture(path) on each of `names` that every torch version's fixture folder holds;
    returns the failures and the count each returned, summed."""
    failures, count = [], 0
    for version_dir in sorted((fixtures_dir / "torch").iterdir()):
        for name in names:
            path = version_dir / f"{name}.pt"
            if path.exists():
                more_failures, more = check_fixture(path)
                failures += more_failures
                count += more
    return failures, count
