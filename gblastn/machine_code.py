"""A task's compiled entry points called without importing numba's package.

numba's import takes 0.17 CPU-s, before any cached entry point is loaded, and a CPU search's
first compiled call (DUST) waits for it (docs/perf/start-up.md, item 133). Where a task's
code is compiled for the CPU, the process that compiled it also writes a bundle: for each
entry point the search called from Python and each of its signatures, the machine code
numba cached, its CPython wrapper's symbol, its environments and the argument types it
takes. A later search on the CPU loads the bundle with llvmlite and numba's three C
extensions alone, as numba would load each entry (numba's runtime and helpers' symbols, one
MCJIT engine, the environments' addresses, `_dynfunc.make_function`), and the stand-ins
(numba_start.LazyDispatcher) call it where the arguments are of the types it was compiled
for. Any other call, or any bundle that does not fit this process (other versions, another
CPU), goes to numba as before.
"""

import builtins
import ctypes
import functools
import hashlib
import importlib.util
import os
import pickle
import sys
import threading

import numpy as np

BUNDLE_VERSION = 1
_C_EXTENSIONS = ("numba._helperlib", "numba._dynfunc", "numba.core.runtime._nrt_python")


# ----------------------------------------------------------------------------------------------
# written where numba compiled the code


def write_bundle(path: str, stand_ins: list, versions: str) -> int:
    """The bundle of the entry points that `stand_ins` (LazyDispatchers whose dispatchers
    numba made) were called with, and of those of the bundle loaded in this process, at
    `path`; how many went in it (0: nothing written). One that cannot (not in numba's
    cache, arguments the bundle cannot check) stays numba's: a search that calls it
    imports numba then."""
    from numba.core import config

    from .cache_files import write_cache_file

    entries = [entry for found in (_BUNDLE.entries.values() if _BUNDLE is not None else ())
               for entry in found]
    codegen = None
    for stand_in in stand_ins:
        dispatcher = stand_in.__dict__.get("_dispatcher")
        if dispatcher is None:
            continue
        for signature in list(dispatcher.overloads):
            if tuple(signature) in getattr(dispatcher, "_linking_only", ()):
                continue
            entry = _entry(stand_in.py_func, dispatcher, signature)
            if entry is not None and not any(_same_entry(entry, kept) for kept in entries):
                entries.append(entry)
                codegen = dispatcher.overloads[signature].library.codegen
    runtime = [name for name in os.listdir(config.CACHE_DIR)
               if name.startswith("numba-runtime-")] if config.CACHE_DIR else []
    if codegen is None or len(runtime) != 1:
        return 0
    with open(os.path.join(config.CACHE_DIR, runtime[0]), "rb") as stored:
        runtime_object = pickle.load(stored)[2][0]
    payload = {"version": BUNDLE_VERSION, "versions": versions,
               "magic": list(codegen.magic_tuple()[1:]), "runtime": runtime_object,
               "entries": entries}
    try:
        data = _NumbaFreePickler.dumps(payload)
    except pickle.PicklingError:
        return 0
    write_cache_file(path, data)
    return len(entries)


def _same_entry(entry: dict, other: dict) -> bool:
    return all(entry[key] == other[key] for key in ("module", "qualname", "spec"))


def _entry(py_func, dispatcher, signature) -> dict | None:
    """What a process without numba needs to call one overload; None where numba's cache
    does not hold its machine code, or its arguments are of types the bundle cannot
    check."""
    spec = tuple(_argument_spec(kind) for kind in signature)
    if any(part is None for part in spec):
        return None
    data = _cached_data(dispatcher, signature)
    if data is None:
        return None
    libdata, fndesc, env = data[0], data[1], data[2]
    environments = [(py_func.__module__, fndesc.env_name, list(env.consts))]
    environments += [(_env_module(other), other.env_name, list(other.consts))
                     for other in (data[8] or ())]
    return {"module": py_func.__module__, "qualname": py_func.__qualname__, "spec": spec,
            "object": libdata[2][0], "wrapper": fndesc.llvm_cpython_wrapper_name,
            "environments": environments}


def _env_module(env) -> str:
    return env.globals.get("__name__", "") if isinstance(env.globals, dict) else ""


def _cached_data(dispatcher, signature):
    """numba's cached data of the overload's machine code, as its cache stores it for this
    CPU (beside it, its LLVM IR may be cached for linking, linked_code)."""
    cache = getattr(dispatcher, "_cache", None)
    files = getattr(cache, "_cache_file", None)
    if files is None:
        return None
    magic = dispatcher.overloads[signature].library.codegen.magic_tuple()
    for key, name in files._load_index().items():
        if key[0] == signature and key[1] == magic:
            data = files._load_data(name)
            if data[0][1] == "object":
                return data
    return None


def _argument_spec(kind):
    """A numba argument type as the bundle checks it: ('a', dtype, ndim, layout, readonly,
    aligned), ('i', bits, signed), ('f', bits), ('b',), ('n',), ('t', (item, ...)); None
    for any other."""
    from numba.core import types
    from numba.np import numpy_support

    if isinstance(kind, types.Array):
        try:
            dtype = np.dtype(numpy_support.as_dtype(kind.dtype))
        except Exception:  # noqa: BLE001 - records and the like stay with numba
            return None
        if dtype.fields is not None:
            return None
        return ("a", dtype.str, kind.ndim, kind.layout, not kind.mutable, kind.aligned)
    if isinstance(kind, types.Boolean):
        return ("b",)
    if isinstance(kind, types.Integer):
        return ("i", kind.bitwidth, kind.signed)
    if isinstance(kind, types.Float):
        return ("f", kind.bitwidth)
    if isinstance(kind, types.NoneType):
        return ("n",)
    if isinstance(kind, types.BaseTuple) and not isinstance(kind, types.BaseNamedTuple):
        items = tuple(_argument_spec(item) for item in kind)
        return None if any(item is None for item in items) else ("t", items)
    return None


class _NumbaFreePickler(pickle.Pickler):
    """Refuses any object of numba's (a constant that would import it to be read back)."""

    @classmethod
    def dumps(cls, value) -> bytes:
        import io

        out = io.BytesIO()
        cls(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
        return out.getvalue()

    def reducer_override(self, obj):
        module = obj.__module__ if isinstance(obj, type) else type(obj).__module__
        if str(module).split(".")[0] in ("numba", "llvmlite"):
            raise pickle.PicklingError(f"{module} object")
        return NotImplemented


# ----------------------------------------------------------------------------------------------
# read where numba is not imported


class _Bundle:
    """A bundle, loaded in one thread while the stand-ins' first calls wait: its engine
    and entries by (module, qualname); the callables made at a stand-in's first call (its
    module, which the callable names, is imported by then)."""

    def __init__(self, path: str):
        self.path = path
        self.ready = threading.Event()
        self.entries = {}  # empty where it was not loaded
        self.engine = self.dynfunc = None
        self.made = {}
        self.lock = threading.Lock()

    def load(self) -> None:
        try:
            path = self.path() if callable(self.path) else self.path
            if path is not None:
                self.engine, self.dynfunc, self.entries = _load(path)
        except Exception:  # noqa: BLE001 - any failure leaves the search to numba
            self.entries = {}
        finally:
            self.ready.set()

    def functions(self, key: tuple) -> list:
        self.ready.wait()
        with self.lock:
            if key not in self.made:
                try:
                    self.made[key] = [(matcher(entry["spec"]),
                                       _function(self.engine, self.dynfunc, entry))
                                      for entry in self.entries.get(key, ())]
                except Exception:  # noqa: BLE001 - this function stays numba's
                    self.made[key] = []
            return self.made[key]


_BUNDLE = None


def expect(path) -> None:
    """The stand-ins' first calls wait for the bundle at `path` to be loaded (or given up)
    by load_expected, which must follow; `path` may be a function that load_expected calls
    for it (None: no bundle after all)."""
    global _BUNDLE
    _BUNDLE = _Bundle(path)


def bundle_expected() -> bool:
    """Whether this process was to load a bundle (`expect`)."""
    return _BUNDLE is not None


def load_expected() -> bool:
    """Load the bundle `expect` named; True where its entry points are in use."""
    bundle = _BUNDLE
    if bundle is None:
        return False
    bundle.load()
    return bool(bundle.entries)


def functions_for(module: str, qualname: str) -> list:
    """The loaded bundle's [(matcher, function)] for a stand-in, matcher(args) telling
    whether the function takes `args` (matcher); [] without a bundle."""
    bundle = _BUNDLE
    return [] if bundle is None else bundle.functions((module, qualname))


def matches(spec: tuple, args: tuple) -> bool:
    """Whether `args` are of the types an entry was compiled for, as numba would type them."""
    return matcher(spec)(args)


def matcher(spec: tuple):
    """matches(spec, args) as a function of `args`, its checks made once: a stand-in asks
    it at every call of a bundled function (about 1,200 calls in a small search), where
    the checks read afresh from the spec took 0.4 us an argument."""
    checks = tuple(_check_of(part) for part in spec)
    count = len(checks)

    def match(args: tuple) -> bool:
        return len(args) == count and all(check(value) for check, value in zip(checks, args))
    return match


def _check_of(part: tuple):
    """A function of one argument: _matches(part, it), an array's checks made once."""
    return _array_check(part) if part[0] == "a" else lambda value: _matches(part, value)


@functools.cache  # one per part: a tuple's array items are checked at every call
def _array_check(part: tuple):
    """A function of one argument: whether it is an array numba types as `part` says
    ("a", dtype string, ndim, layout, read-only, aligned). Its dtype is compared by identity
    first (numpy's builtin dtypes are mostly one object each), else by its string; numba
    types every array as aligned, whatever its flag says."""
    _, text, ndim, layout, readonly, aligned = part
    dtype = np.dtype(text)

    def check(value) -> bool:
        if not aligned or type(value) is not np.ndarray or value.ndim != ndim or \
                (value.dtype is not dtype and value.dtype.str != text):
            return False
        flags = value.flags
        found = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
        return found == layout and (not flags.writeable) == readonly
    return check


def _matches(part: tuple, value) -> bool:
    kind = part[0]
    if kind == "a":
        return _array_check(part)(value)
    if kind == "i":
        if type(value) is int:  # numba: int64 below 2**63 in magnitude
            return part[1:] == (64, True) and value.bit_length() < 64
        return isinstance(value, np.integer) and not isinstance(value, np.bool_) and \
            value.dtype.itemsize * 8 == part[1] and \
            (value.dtype.kind == "i") == part[2]
    if kind == "f":
        if type(value) is float:
            return part[1] == 64
        return isinstance(value, np.floating) and value.dtype.itemsize * 8 == part[1]
    if kind == "b":
        return type(value) is bool or isinstance(value, np.bool_)
    if kind == "n":
        return value is None
    if kind == "t":
        return type(value) is tuple and len(value) == len(part[1]) and \
            all(_matches(item, element) for item, element in zip(part[1], value))
    return False


def _load(path: str) -> tuple:
    """(MCJIT engine, numba._dynfunc, entries by (module, qualname)); no entries where the
    bundle does not fit this process."""
    from .compile_cache import installed_versions

    with open(path, "rb") as stored:
        payload = pickle.load(stored)
    if payload.get("version") != BUNDLE_VERSION or payload["versions"] != installed_versions():
        return None, None, {}
    if "numba" in sys.modules or os.environ.get("NUMBA_CPU_NAME") or \
            os.environ.get("NUMBA_CPU_FEATURES"):
        return None, None, {}  # numba's own loading (or the user's CPU settings) stands
    import llvmlite.binding as ll

    cpu, features = ll.get_host_cpu_name(), ll.get_host_cpu_features().flatten()
    if [cpu, features] != list(payload["magic"]):
        return None, None, {}
    extensions = _c_extensions()
    _install_symbols(ll, extensions)
    engine = _engine(ll, cpu, features, [payload["runtime"]] +
                     [entry["object"] for entry in payload["entries"]])
    entries = {}
    for entry in payload["entries"]:
        entries.setdefault((entry["module"], entry["qualname"]), []).append(entry)
    return engine, extensions["numba._dynfunc"], entries


def _c_extensions() -> dict:
    """numba's C extensions, from their files: importing them by name would import numba's
    package first. Kept in sys.modules, where numba finds them should it be imported."""
    spec = importlib.util.find_spec("numba")  # the package found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("numba is not installed")
    folder = list(spec.submodule_search_locations)[0]
    loaded = {}
    for name in _C_EXTENSIONS:
        if name in sys.modules:
            loaded[name] = sys.modules[name]
            continue
        found = importlib.machinery.PathFinder.find_spec(
            name.rsplit(".", 1)[1], [os.path.join(folder, *name.split(".")[1:-1])])
        module = importlib.util.module_from_spec(found)
        found.loader.exec_module(module)
        sys.modules[name] = loaded[name] = module
    return loaded


def _install_symbols(ll, extensions: dict) -> None:
    """The symbols numba's code calls, as numba's `_load_global_helpers` and its runtime's
    `initialize` give them to LLVM; and numba's C unpickler (boxing a returned array calls
    it, for the array's type) made to use _numba_unpickle here."""
    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    ll.add_symbol("_Py_NoneStruct", id(None))
    for name in ("numba._helperlib", "numba._dynfunc"):
        for py_name, address in extensions[name].c_helpers.items():
            ll.add_symbol("numba_" + py_name, address)
    for value in builtins.__dict__.values():
        if isinstance(value, type) and issubclass(value, BaseException):
            ll.add_symbol(f"PyExc_{value.__name__}", id(value))
    runtime = extensions["numba.core.runtime._nrt_python"]
    for py_name, address in runtime.c_helpers.items():
        ll.add_symbol(py_name if py_name.startswith("_") else "NRT_" + py_name, address)
    runtime.memsys_use_cpython_allocator()
    _prime_unpickler(extensions["numba._helperlib"].c_helpers["unpickle"])


def _prime_unpickler(address: int) -> None:
    """numba's C `numba_unpickle` imports numba.core.serialize (and, through Python's C
    import, the `numba` package) at its first call, and keeps its `_numba_unpickle` for the
    process: a first call made here, with stand-ins of those modules in place for its
    length, keeps the one below (numba's own, but for the cloudpickle that reads what
    pickle reads)."""
    import types

    import _imp

    names = ("numba", "numba.core", "numba.core.serialize")
    _imp.acquire_lock()
    try:
        if any(name in sys.modules for name in names):
            raise ImportError("numba is being imported")
        stand_ins = {name: types.ModuleType(name) for name in names}
        stand_ins["numba.core.serialize"]._numba_unpickle = _numba_unpickle
        sys.modules.update(stand_ins)
        try:
            unpickle = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_char_p, ctypes.c_int,
                                         ctypes.c_char_p)(address)
            data = pickle.dumps(None)
            if unpickle(data, len(data), hashlib.sha1(data).digest()) is not None:
                raise ImportError("numba's unpickler")
        finally:
            for name in names:
                if sys.modules.get(name) is stand_ins[name]:
                    del sys.modules[name]
    finally:
        _imp.release_lock()


_UNPICKLED = {}


def _numba_unpickle(address, bytedata, hashed):
    """numba.core.serialize._numba_unpickle."""
    key = (address, hashed)
    try:
        return _UNPICKLED[key]
    except KeyError:
        _UNPICKLED[key] = value = pickle.loads(bytedata)
        return value


def _engine(ll, cpu: str, features: str, objects: list):
    target = ll.Target.from_default_triple()
    machine = target.create_target_machine(cpu=cpu, features=features, opt=3,
                                           codemodel="jitdefault", jit=True)
    engine = ll.create_mcjit_compiler(ll.parse_assembly(""), machine)
    for code in objects:
        engine.add_object_file(ll.ObjectFileRef.from_data(code))
    engine.finalize_object()
    return engine


def _function(engine, dynfunc, entry: dict):
    """The entry's callable, its environments' addresses set (as numba's `set_env`)."""
    environments = []
    for module, name, consts in entry["environments"]:
        found = sys.modules.get(module)
        env = dynfunc.Environment(found.__dict__ if found is not None else {"__name__": module})
        env.consts[:] = consts
        address = engine.get_global_value_address(name)
        if address:
            (ctypes.c_void_p * 1).from_address(address)[0] = ctypes.c_void_p(id(env))
        environments.append(env)
    address = engine.get_function_address(entry["wrapper"])
    if not address:
        raise LookupError(entry["wrapper"])
    module = sys.modules.get(entry["module"])
    return dynfunc.make_function(module, entry["qualname"].split(".")[-1],
                                 f"compiled wrapper for {entry['qualname']!r}", address,
                                 environments[0], (engine, environments))
