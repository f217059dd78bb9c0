#!/usr/bin/env python3
"""What torch.load sees in a checkpoint, as the JSON that `pthinspect ls --json --checksum` prints.

    torch_dump.py FILE [--map-location cpu|none]

Prints `{"format": "zip" | "legacy" | "torchscript", "tensors": [...]}` (DESIGN.md, "The JSON that pthinspect ls
--json [--checksum] prints"), one tensor per line. Each tensor: name, dtype (torch's name without
`torch.`), shape, stride, storage_offset (elements), storage (the storage's key in the file),
location (the tag written in the file), nbytes (numel x element size) and xxh3 (XXH3-64 of the
elements in row-major order as little-endian bytes: a view hashes what it shows; quantized
tensors hash int_repr(); conj/neg bits are resolved first), as 16 lowercase hex digits.
Works with torch 1.13 and 2.x (the same file gives the same JSON under both).

How the file is loaded
----------------------
torch.load(f, map_location=<callable>, pickle_module=<shim>, weights_only=False):
* the map_location callable returns every storage as it is (on the CPU), so files whose storages
  are tagged 'cuda:N' load on a machine without CUDA (`--map-location none` uses torch's default
  restore instead, which fails there, as torch does);
* the pickle_module shim gives torch a pure-Python Unpickler (a subclass of pickle._Unpickler)
  whose `persistent_load` attribute is a property: when torch assigns its own persistent_load,
  the shim wraps it, and for every ('storage', type, key, location, ...) persistent id records
  StorageImpl address (`UntypedStorage._cdata`) -> (key, location) of the storage torch returned.
  torch caches storages by key, so tensors that share a storage in torch share a key here.
  A tensor's key and location are found from `tensor.untyped_storage()._cdata` (1.13:
  `tensor._storage()._cdata`). The location is the tag as written in the persistent id
  (decoded from bytes as ASCII if needed); the callable's view of it is checked to agree.
Everything else (find_class, rebuild functions, byte order) is torch's own code.

TorchScript archives (torch.jit.save) are not loaded with torch.jit.load, which shows no storage
keys and no pickle order: data.pkl is unpickled by torch.serialization._load (torch's own
persistent_load and rebuild functions, storages under data/) with the shim's find_class turning
each `__torch__.*` class into a plain Python class, so a scripted module is an object whose
attributes are what its BUILD state held (`lin.weight`, `bn.running_mean`, `tl.0` for a
List[Tensor] attribute) — the naming rule below, as for any unknown class. Archives whose
constants.pkl holds tensors have them unpickled the same way from constants.pkl, with storage
records under constants/ (a reader proxy maps torch's `data/<key>` to `constants/<key>`), named
`CONSTANTS.c<index>` as the archive's code and pthload name them.

Classes the fixtures pickle by reference (tests/fixtures/pthload_fixture_classes.py) are found
because tests/fixtures/ is put on sys.path.

Names (the rule implemented here, exactly)
------------------------------------------
The tree walked is the object torch.load returns. The root's name is "". A child's name is
`<parent>.<component>`, or just `<component>` when the parent is the root. Walk depth-first, in
container order (which is the order the pickle wrote them), and:
* a tensor (any torch.Tensor instance: Parameter, buffers, tensor subclasses) is listed under its
  name; its own attributes are not descended into. A wrapper subclass without storage
  (data_ptr() 0, storage inaccessible) lists name, dtype, shape, stride, storage_offset,
  "storage": null, "location": its device, nbytes and "subclass" (module.qualname), no xxh3.
  A nested tensor of the strided layout lists name, dtype, "shape": [number of components] and
  "layout": "nested", followed by its components (unbind()) as `<name>.0`, `<name>.1`, ...
  A jagged nested tensor (NJT) is not listed itself: its `<name>.values`, `<name>.offsets` (and
  `<name>.lengths` when it has them) are. A tensor reached by several paths (tied
  weights, the same tensor twice in a list, a dict shared by two parents) is listed once per path.
  A sparse tensor lists name, dtype, shape, followed by its parts as ordinary entries
  `<name>.indices`, `<name>.values` (COO) or `<name>.crow_indices` / `.col_indices` /
  `.ccol_indices` / `.row_indices` / `.values` (compressed layouts).
* dict and every dict subclass (OrderedDict, defaultdict, Counter, ...): each item in iteration
  order (the pickle's), component = the key as text, str(key), for keys of type str, int, bool,
  float, bytes, None and (exactly) tuples of those; any other key (a tensor, an object, a
  frozenset, a namedtuple) names its value `<value N>` (N its position in the dict) and is
  walked itself as `<key N>`. Attributes set on the dict itself (e.g. an OrderedDict
  state_dict's `_metadata`) are NOT walked.
* list, tuple and their subclasses (torch.Size, namedtuples): each element, component = its index
  in decimal ("0", "1", ...).
* set and frozenset: each member, component = its position in the pickle (recorded by the shim:
  Python iterates a set of tensors in hash order, not in the pickle's).
* numpy arrays and numpy scalars (0-dim) whose dtype torch also has (bool, int8-64, uint8-64,
  float16/32/64, complex64/128, either byte order) are listed like tensors, with
  "storage": null, "location": "cpu" (torch.load never moves them) and "source": "numpy"; their
  stride is numpy's byte strides divided by the item size, their xxh3 that of the elements in
  row-major order as little-endian bytes. Other numpy values (object arrays, strings, structured
  dtypes) are not listed and not descended into.
* str, bytes, bytearray, numbers, None, bool, torch.dtype/device/layout/memory_format/qscheme,
  classes, functions: leaves.
* any other object (an "unknown class", e.g. an nn.Module, argparse.Namespace, a dataclass,
  functools.partial), by `obj.__reduce_ex__(2)`:
  - the arguments of the reducing call by position (NEWOBJ's without the class, REDUCE's), then
    NEWOBJ_EX's keyword arguments by name;
  - its pickled state, the 3rd item (what BUILD received): a dict: its items as attributes,
    component = attribute name (for nn.Module: its __dict__, so `_modules.0._parameters.weight`);
    a 2-tuple (dict or None, slots dict or None): the dict's items, then the slots dict's items;
    any other value: walked in place of the object, under the object's own name (so
    functools.partial's tensor argument is `<name>.1.0`); no state: nothing.
* a jagged nested tensor also lists the tensors it caches in `_metadata_cache` as
  `<name>._metadata_cache.<key>`.
This is pthload's rule set (docs/naming.md), written over torch's result.
* cycles: a container or object already on the current path is not entered again.
"""

import argparse
import json
import os
import pickle
import sys
import types
import zipfile

import torch

try:
    import numpy
except ImportError:  # pragma: no cover - numpy comes with both torch installs used here
    numpy = None

import xxhash

# Classes the fixtures pickle by reference (a wrapper subclass) live in tests/fixtures/.
_FIXTURE_CLASSES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "fixtures")
if _FIXTURE_CLASSES not in sys.path:
    sys.path.append(_FIXTURE_CLASSES)


# --- the pickle module shim ----------------------------------------------------------------

def _untyped(storage):
    """The UntypedStorage behind what a persistent_load returned (1.13 and 2.x spellings)."""
    if isinstance(storage, torch.storage.TypedStorage):
        inner = getattr(storage, "_untyped_storage", None)
        return inner if inner is not None else storage._storage
    return storage


def _tensor_cdata(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()._cdata
    return t._storage()._cdata


def _ascii(value):
    return value.decode("ascii") if isinstance(value, bytes) else value


class _Recorder:
    def __init__(self):
        self.by_cdata = {}      # StorageImpl address -> (key, location tag from the persistent id)
        self.restored = {}      # StorageImpl address -> tag the map_location callable was given
        self.keep = []          # keeps every recorded storage alive so addresses stay unique


_SCRIPT_CLASSES = {}


def _script_class(module, name):
    key = (module, name)
    if key not in _SCRIPT_CLASSES:
        _SCRIPT_CLASSES[key] = type(name, (), {"__module__": module})
    return _SCRIPT_CLASSES[key]


# Members of every set and frozenset the pickle built, in pickle order (by id; the set is kept
# alive beside its list so that its id stays unique): Python iterates a set of tensors in hash
# order, which changes from run to run, and pthload names a set's members by pickle position.
_SET_ORDER = {}


def _record_set(result, members):
    _SET_ORDER.setdefault(id(result), (result, []))[1].extend(members)
    return result


def _set_from(items=()):
    items = list(items)
    return _record_set(set(items), items)


def _frozenset_from(items=()):
    items = list(items)
    return _record_set(frozenset(items), items)


def _make_pickle_module(recorder):
    class Unpickler(pickle._Unpickler):
        # Protocol 4's set opcodes, recording the members' order (Lib/pickle.py's own bodies).
        dispatch = dict(pickle._Unpickler.dispatch)

        def _load_empty_set(self):
            self.append(_record_set(set(), []))

        def _load_additems(self):
            items = self.pop_mark()
            target = self.stack[-1]
            target.update(items)
            if isinstance(target, set):
                _record_set(target, items)

        def _load_frozenset(self):
            items = self.pop_mark()
            self.append(_record_set(frozenset(items), items))

        dispatch[pickle.EMPTY_SET[0]] = _load_empty_set
        dispatch[pickle.ADDITEMS[0]] = _load_additems
        dispatch[pickle.FROZENSET[0]] = _load_frozenset

        def find_class(self, module, name):
            # Protocols 0-3 pickle a set as set(list_of_members): built here in that order.
            if module in ("builtins", "__builtin__") and name == "set":
                return _set_from
            if module in ("builtins", "__builtin__") and name == "frozenset":
                return _frozenset_from
            # TorchScript's classes (`__torch__.Net`) exist only in the archive's code/: each
            # stands for a plain object (pthload's "unknown class").
            if module == "__torch__" or module.startswith("__torch__."):
                return _script_class(module, name)
            return super().find_class(module, name)

        def _pthload_persistent_load(self, saved_id):
            raise pickle.UnpicklingError("persistent id without a persistent_load")

        @property
        def persistent_load(self):
            return self._pthload_persistent_load

        @persistent_load.setter
        def persistent_load(self, torch_persistent_load):
            def recording(saved_id):
                result = torch_persistent_load(saved_id)
                if isinstance(saved_id, tuple) and _ascii(saved_id[0]) == "storage":
                    key, location = saved_id[2], _ascii(saved_id[3])
                    untyped = _untyped(result)
                    recorder.by_cdata[untyped._cdata] = (str(key), location)
                    recorder.keep.append(result)
                return result
            self._pthload_persistent_load = recording

    module = types.ModuleType("pthload_torch_dump_pickle")
    module.__dict__.update({k: v for k, v in vars(pickle).items() if not k.startswith("__")})
    module.Unpickler = Unpickler
    return module


class _ConstantsReader:
    """A PyTorchFileReader whose storage records `data/<key>` are read from `constants/<key>`:
    torch.serialization._load finds storages only under data/."""

    def __init__(self, reader):
        self._reader = reader

    @staticmethod
    def _map(name):
        return "constants/" + name[5:] if name.startswith("data/") else name

    def __getattr__(self, attr):
        method = getattr(self._reader, attr)
        if attr in ("get_record", "has_record", "get_storage_from_record", "get_record_offset"):
            return lambda name, *args: method(self._map(name), *args)
        return method


def _load_torchscript(path, map_location, shim):
    """data.pkl of a torch.jit.save archive, unpickled by torch.serialization._load (torch's own
    persistent_load and rebuild functions, storages under data/) with every `__torch__.*` class
    standing for a plain object whose BUILD state becomes its attributes, as pthload reads them;
    then constants.pkl's tensors (storages under constants/) as `CONSTANTS.c<index>`."""
    reader = torch._C.PyTorchFileReader(path)
    root = torch.serialization._load(reader, map_location, shim, pickle_file="data.pkl")
    with zipfile.ZipFile(path) as z:
        constants = next(n for n in z.namelist() if n.split("/", 1)[-1] == "constants.pkl")
        has_constants = z.read(constants) != pickle.dumps((), protocol=2)
    if not has_constants:
        return root, None
    constants = torch.serialization._load(_ConstantsReader(torch._C.PyTorchFileReader(path)),
                                          map_location, shim, pickle_file="constants.pkl")
    return root, constants


def detect_format(path):
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"PK\x03\x04":
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
        if any(n.split("/", 1)[-1] == "constants.pkl" for n in names):
            return "torchscript"
        return "zip"
    return "legacy"


def load(path, map_location="cpu"):
    """torch.load the file; returns (format, root object, recorder)."""
    fmt = detect_format(path)
    recorder = _Recorder()

    def to_cpu(storage, location):
        recorder.restored[_untyped(storage)._cdata] = location
        recorder.keep.append(storage)
        return storage

    ml = to_cpu if map_location == "cpu" else None
    kwargs = {}
    if "weights_only" in torch.load.__code__.co_varnames:
        kwargs["weights_only"] = False
    shim = _make_pickle_module(recorder)
    # torch 1.13's load replaces any pickle_module by the module `pickle` when weights_only is
    # False, so the shim also stands in for torch.serialization's `pickle` during the call.
    saved = torch.serialization.pickle
    torch.serialization.pickle = shim
    try:
        if fmt == "torchscript":
            root, constants = _load_torchscript(path, ml, shim)
            if constants is not None:
                root = _WithConstants(root, constants)
        else:
            try:
                with open(path, "rb") as f:
                    root = torch.load(f, map_location=ml, pickle_module=shim, **kwargs)
            except RuntimeError as e:
                # torch refuses a callable map_location for wrapper subclasses and device tensors
                # from numpy: load where the tags say (fine for 'cpu'-tagged fixtures).
                if "Callable map_location not supported" not in str(e):
                    raise
                recorder.restored.clear()
                with open(path, "rb") as f:
                    root = torch.load(f, map_location=None, pickle_module=shim, **kwargs)
    finally:
        torch.serialization.pickle = saved
    if recorder.restored and not recorder.by_cdata:
        raise RuntimeError(f"{path}: the pickle shim saw no persistent ids; torch changed?")
    for cdata, location in recorder.restored.items():
        recorded = recorder.by_cdata.get(cdata)
        if recorded is not None and recorded[1] != location:
            raise RuntimeError(f"{path}: location disagreement {recorded} vs {location}")
    return fmt, root, recorder


class _WithConstants:
    """A TorchScript archive's objects: data.pkl's root, then constants.pkl's tuple as
    `CONSTANTS.c<index>` (walk() treats this specially)."""

    def __init__(self, root, constants):
        self.root, self.constants = root, constants


# --- naming --------------------------------------------------------------------------------

_LEAVES = (str, bytes, bytearray, int, float, complex, type(None), type, types.FunctionType,
           types.BuiltinFunctionType, types.MethodType, torch.dtype, torch.device, torch.layout,
           torch.memory_format, torch.qscheme)


def _join(parent, component):
    return component if parent == "" else f"{parent}.{component}"


_TEXT_KEYS = (str, int, bool, float, bytes, type(None))


def _has_text(key):
    """Whether pthload names an entry by str(key) (pickle.key_text): str, int, bool, float,
    bytes, None and (exactly) tuples of those; any other key (a tensor, an object, a frozenset,
    a namedtuple, a numpy scalar) names its value `<value N>` instead."""
    if type(key) in _TEXT_KEYS:
        return True
    return type(key) is tuple and all(_has_text(k) for k in key)


def _entries(obj):
    return list(obj.items())


def _walk_entries(entries, name, on_path):
    for index, (k, v) in enumerate(entries):
        yield from walk(v, _join(name, str(k) if _has_text(k) else f"<value {index}>"), on_path)
        if not _has_text(k):
            yield from walk(k, _join(name, f"<key {index}>"), on_path)


def _set_members(obj):
    recorded = _SET_ORDER.get(id(obj))
    return recorded[1] if recorded is not None and recorded[0] is obj else list(obj)


def _reduce_args(reduced):
    """(positional, keyword) arguments of the call a __reduce_ex__(2) result pickles: NEWOBJ's
    (copyreg.__newobj__(cls, *args)), NEWOBJ_EX's (__newobj_ex__(cls, args, kwargs)) or
    REDUCE's."""
    func, args = reduced[0], tuple(reduced[1] or ())
    name = getattr(func, "__name__", "")
    if name == "__newobj__":
        return args[1:], {}
    if name == "__newobj_ex__":
        return tuple(args[1]), dict(args[2])
    return args, {}


def walk(obj, name="", on_path=None):
    """Yields (name, tensor) in the order described in the module docstring."""
    if on_path is None:
        on_path = set()
    if isinstance(obj, _WithConstants):
        yield from walk(obj.root, name, on_path)
        # The archive's code calls them CONSTANTS.c0, CONSTANTS.c1... (torch.jit.save writes a
        # tuple; python_print.cpp).
        for index, constant in enumerate(obj.constants):
            yield from walk(constant, f"CONSTANTS.c{index}", on_path)
        return
    if isinstance(obj, torch.Tensor):
        if _is_jagged(obj):
            yield _join(name, "values"), obj._values
            yield _join(name, "offsets"), obj._offsets
            if obj._lengths is not None:
                yield _join(name, "lengths"), obj._lengths
            for k, v in getattr(obj, "_metadata_cache", {}).items():
                if isinstance(v, torch.Tensor):
                    yield _join(name, f"_metadata_cache.{k}"), v
            return
        yield name, obj
        return
    # Before the leaves: numpy.float64 is a float, numpy.bool_ is not.
    if numpy is not None and isinstance(obj, (numpy.ndarray, numpy.generic)):
        if numpy_dtype_name(obj.dtype) is not None:
            yield name, obj
        return
    if isinstance(obj, _LEAVES):
        return
    if id(obj) in on_path:
        return
    on_path.add(id(obj))
    try:
        if isinstance(obj, dict):
            yield from _walk_entries(_entries(obj), name, on_path)
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(list(obj)):
                yield from walk(v, _join(name, str(i)), on_path)
        elif isinstance(obj, (set, frozenset)):
            for i, v in enumerate(_set_members(obj)):
                yield from walk(v, _join(name, str(i)), on_path)
        else:
            try:
                reduced = obj.__reduce_ex__(2)
            except Exception:
                reduced = None
            if not isinstance(reduced, tuple) or len(reduced) < 2:
                return
            args, kwargs = _reduce_args(reduced)
            for i, v in enumerate(args):
                yield from walk(v, _join(name, str(i)), on_path)
            yield from _walk_entries(list(kwargs.items()), name, on_path)
            state = reduced[2] if len(reduced) > 2 else None
            if state is None:
                return
            if (isinstance(state, tuple) and len(state) == 2
                    and all(s is None or isinstance(s, dict) for s in state)):
                for part in state:
                    yield from _walk_entries(_entries(part or {}), name, on_path)
            elif isinstance(state, dict):
                yield from _walk_entries(_entries(state), name, on_path)
            else:
                yield from walk(state, name, on_path)
    finally:
        on_path.discard(id(obj))


# --- one tensor ----------------------------------------------------------------------------

def dtype_name(dtype):
    return str(dtype).replace("torch.", "", 1)


def tensor_bytes(t):
    """The elements of t in row-major order, little-endian (this machine is little-endian)."""
    assert sys.byteorder == "little"
    t = t.detach()
    if t.is_quantized:
        t = t.int_repr()
    t = t.resolve_conj().resolve_neg()
    flat = t.contiguous().reshape(-1)
    if flat.dtype != torch.uint8:
        flat = flat.view(torch.uint8)
    return flat.numpy().tobytes()


def xxh3_hex(data):
    return xxhash.xxh3_64_hexdigest(data)


_SPARSE_PARTS = {
    torch.sparse_coo: (("indices", lambda t: t._indices()), ("values", lambda t: t._values())),
    torch.sparse_csr: (("crow_indices", lambda t: t.crow_indices()),
                       ("col_indices", lambda t: t.col_indices()),
                       ("values", lambda t: t.values())),
    torch.sparse_csc: (("ccol_indices", lambda t: t.ccol_indices()),
                       ("row_indices", lambda t: t.row_indices()),
                       ("values", lambda t: t.values())),
}
for _layout, _parts in ((getattr(torch, "sparse_bsr", None), "csr"),
                        (getattr(torch, "sparse_bsc", None), "csc")):
    if _layout is not None:
        _SPARSE_PARTS[_layout] = _SPARSE_PARTS[getattr(torch, "sparse_" + _parts)]


_NUMPY_DTYPES = {("b", 1): "bool", ("i", 1): "int8", ("i", 2): "int16", ("i", 4): "int32",
                 ("i", 8): "int64", ("u", 1): "uint8", ("u", 2): "uint16", ("u", 4): "uint32",
                 ("u", 8): "uint64", ("f", 2): "float16", ("f", 4): "float32",
                 ("f", 8): "float64", ("c", 8): "complex64", ("c", 16): "complex128"}


def numpy_dtype_name(dtype):
    """torch's name for a numpy dtype, or None when torch has no such dtype."""
    if dtype.fields is not None or dtype.subdtype is not None:
        return None
    return _NUMPY_DTYPES.get((dtype.kind, dtype.itemsize))


def describe_numpy(name, value, checksum=True):
    a = numpy.asarray(value)  # a scalar becomes a 0-dim array
    entry = {
        "name": name,
        "dtype": numpy_dtype_name(a.dtype),
        "shape": list(a.shape),
        "stride": [s // a.itemsize for s in a.strides],
        "storage_offset": 0,
        "storage": None,
        "location": "cpu",
        "nbytes": a.nbytes,
        "source": "numpy",
    }
    if checksum:
        entry["xxh3"] = xxh3_hex(a.astype(a.dtype.newbyteorder("<")).tobytes(order="C"))
    return [entry]


def _is_jagged(t):
    return getattr(t, "layout", None) == getattr(torch, "jagged", object()) and hasattr(t, "_values")


def _storage_less_wrapper(t):
    """Whether t is a wrapper subclass without storage (_make_wrapper_subclass)."""
    if type(t) in (torch.Tensor, torch.nn.Parameter) or t.device.type == "meta":
        return False
    try:
        return t.untyped_storage().data_ptr() == 0 and t.data_ptr() == 0
    except (RuntimeError, NotImplementedError):
        return True


def describe(name, t, recorder, checksum=True):
    """The schema's entries for one tensor (a list: sparse and nested tensors add their parts)."""
    if numpy is not None and isinstance(t, (numpy.ndarray, numpy.generic)):
        return describe_numpy(name, t, checksum)
    if getattr(t, "is_nested", False):
        components = t.unbind()
        entries = [{"name": name, "dtype": dtype_name(t.dtype), "shape": [len(components)],
                    "layout": "nested"}]
        for i, c in enumerate(components):
            entries += describe(_join(name, str(i)), c, recorder, checksum)
        return entries
    if _storage_less_wrapper(t):
        cls = type(t)
        return [{"name": name, "dtype": dtype_name(t.dtype), "shape": list(t.shape),
                 "stride": list(t.stride()), "storage_offset": t.storage_offset(),
                 "storage": None, "location": str(t.device),
                 "nbytes": t.numel() * t.element_size(),
                 "subclass": f"{cls.__module__}.{cls.__qualname__}"}]
    if t.layout != torch.strided:
        entries = [{"name": name, "dtype": dtype_name(t.dtype), "shape": list(t.shape)}]
        for part, get in _SPARSE_PARTS.get(t.layout, ()):
            entries += describe(_join(name, part), get(t), recorder, checksum)
        return entries
    if t.device.type == "meta":
        key, location = None, "meta"
    else:
        cdata = _tensor_cdata(t)
        if cdata not in recorder.by_cdata:
            raise RuntimeError(f"tensor {name!r}: its storage came from no persistent id")
        key, location = recorder.by_cdata[cdata]
    entry = {
        "name": name,
        "dtype": dtype_name(t.dtype),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "storage_offset": t.storage_offset(),
        "storage": key,
        "location": location,
        "nbytes": t.numel() * t.element_size(),
    }
    if checksum and t.device.type != "meta":
        entry["xxh3"] = xxh3_hex(tensor_bytes(t))
    return [entry]


def dump(path, map_location="cpu", checksum=True):
    """The schema's object for one file, as a dict."""
    fmt, root, recorder = load(path, map_location)
    tensors = []
    for name, t in walk(root):
        tensors += describe(name, t, recorder, checksum)
    result = {"format": fmt, "tensors": tensors}
    unused = unused_storages(path, fmt, recorder, tensors)
    if unused is not None:
        result["unused_storages"] = unused
    return result


def unused_storages(path, fmt, recorder, tensors):
    """Keys of the storages the file holds that no listed tensor views, sorted: every key torch's
    persistent_load returned a storage for, and in a zip every record under data/, less the keys
    of the listed entries. None where this cannot be told from torch's result: TorchScript
    archives, and files holding quantized or nested tensors (whose per-channel parameters and
    metadata use storages of their own that no listed entry names)."""
    if fmt not in ("zip", "legacy"):
        return None
    if any(t.get("layout") == "nested" or t["dtype"].startswith("q") for t in tensors):
        return None
    held = {key for key, _ in recorder.by_cdata.values()}
    if fmt == "zip":
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
        top = names[0].split("/", 1)[0]
        held |= {n[len(top) + 6:] for n in names if n.startswith(top + "/data/")}
    used = {t["storage"] for t in tensors if t.get("storage") is not None}
    return sorted(held - used)


def to_json(result):
    """The dump as JSON text: one tensor per line, keys in schema order."""
    lines = [json.dumps(t, separators=(", ", ": ")) for t in result["tensors"]]
    head = f'{{"format": {json.dumps(result["format"])}, "tensors": ['
    tail = "]"
    if "unused_storages" in result:
        tail += f', "unused_storages": {json.dumps(result["unused_storages"])}'
    if not lines:
        return head + tail + "}\n"
    return head + "\n" + ",\n".join(lines) + "\n" + tail + "}\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("--map-location", default="cpu", choices=["cpu", "none"],
                        help="cpu (default): every storage stays on the CPU, whatever its tag; "
                             "none: torch's default restore (cuda-tagged files fail without CUDA)")
    parser.add_argument("--no-checksum", action="store_true", help="leave out xxh3")
    args = parser.parse_args(argv)
    sys.stdout.write(to_json(dump(args.file, args.map_location, not args.no_checksum)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
