"""numba's start-up in a search's process, cut to what gblastn's cached compiled code needs.

A search runs with the GIL held nearly throughout, and its stages' first calls wait for
their machine code to be loaded from numba's cache, one entry point at a time (numba's
compiler lock). Each step below held the GIL on the search's path (docs/perf/start-up.md);
each is skipped only where numba's internals are those it was written for, and a
compilation (a cache miss) still finds everything it needs. gblastn's compiled functions
are declared with this module's `njit`, whose dispatchers are made on first use, and its
intrinsics with `intrinsic`; a CPU search whose task has a machine-code bundle calls that,
without numba (machine_code).
"""

import functools
import os
import struct
import sys
import threading


def skip_numba_extras() -> None:
    """numba's import also imports, when installed, scipy (to check its version, and at the
    first compilation its BLAS bindings, for np.dot, a slow import), coverage (to
    follow compiled code under coverage.py) and yaml (to read a .numba_config.yaml in the
    working directory). gblastn's compiled code needs none of them, so they are left out
    unless in use: a config file present, or coverage already running. numba's typing
    words an error for each implementation that it tries and rejects (tens of thousands in
    a compilation), each through colorama's set-up of the terminal for colours: numba's
    own switch leaves the colours out, where the user has not set it. numba's cache names
    and checks its files with hashlib's sums, whose OpenSSL backend maps libcrypto (3.4 MB
    resident, a fiftieth of a small search's peak): the interpreter's own sums, where it
    has them, give the same digests. numba's module that runs other packages' numba
    extensions imports importlib.metadata (and email's parsers, 0.02-0.03 CPU-s) as numba
    is imported; gblastn's code uses no extension, so that module is one that runs none.
    Called before numba is imported."""
    os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")
    if "numba" not in sys.modules and not any(isinstance(finder, _NoNumbaExtensions)
                                              for finder in sys.meta_path):
        sys.meta_path.insert(0, _NoNumbaExtensions())
    sys.modules.setdefault("scipy", None)
    sys.modules.setdefault("scipy.linalg.cython_blas", None)  # in case scipy came first
    sys.modules.setdefault("coverage", None)
    if not os.path.isfile(".numba_config.yaml"):
        sys.modules.setdefault("yaml", None)
    if "hashlib" not in sys.modules and _builtin_hashes():
        sys.modules.setdefault("_hashlib", None)


class _NoNumbaExtensions:
    """Finds, and makes, numba.core.entrypoints as a module whose `init_all` runs no
    extension (through the import system, which binds it to its package as numba's code
    expects)."""

    NAME = "numba.core.entrypoints"

    def find_spec(self, name, path=None, target=None):
        from importlib.machinery import ModuleSpec

        return ModuleSpec(name, self) if name == self.NAME else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module._already_initialized = True
        module.init_all = lambda: None


def _builtin_hashes() -> bool:
    """Whether the interpreter has its own SHA-1 and SHA-256, which hashlib falls back on
    without OpenSSL (some builds leave them out)."""
    from importlib.machinery import PathFinder

    names = ("_sha1", "_sha256") if sys.version_info < (3, 12) else ("_sha1", "_sha2")
    return all(name in sys.builtin_module_names or PathFinder.find_spec(name) is not None
               for name in names)


def lighten_numba_start() -> None:
    """numba's steps that loading cached code does not need, skipped (by the warm-up
    thread, once numba is imported; should another thread's compilation come first, that
    one merely takes them):

    * the scan of every installed distribution's entry points for numba extensions;
    * filling the type system's registries before cached machine code is loaded: loaded
      code needs only numba's runtime;
    * parsing each loaded entry point's LLVM bitcode (see `_load_without_bitcode`);
    * importing numba's own modules to rebuild the environments of the numba functions
      compiled into gblastn's (see `_environments_without_imports`);
    * compiling numba's runtime (see `_runtime_from_cache`);
    * importing numpy.ma to type the first array passed (see `_arrays_typed_without_masks`)."""
    _import_numba()
    from numba.core import caching, entrypoints
    from numba.core.runtime import nrt

    entrypoints._already_initialized = True
    _load_without_bitcode()
    _environments_without_imports()
    _runtime_from_cache()
    _arrays_typed_without_masks()
    cache = caching.Cache
    if not (hasattr(nrt, "rtsys") and hasattr(cache, "_load_overload") and
            hasattr(cache, "_guard_against_spurious_io_errors")):
        return

    def load_overload(self, sig, target_context):
        nrt.rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    cache.load_overload = load_overload


def _load_without_bitcode() -> None:
    """A cached entry point holds its machine code and its LLVM bitcode. numba parses the
    bitcode on loading, for two uses: to link the function into a later compilation that
    calls it, and to list the symbols the library defines, which numba checks before it
    takes a function's address. A search compiles nothing, and the machine code lists its
    own symbols. So the bitcode is parsed only when a compilation links the library or a
    symbol is asked for that the machine code does not define (linkonce functions that were
    inlined away), and the symbols come from the machine code's ELF symbol table. Parsing
    and listing (a Python loop holding the GIL) were nearly all of each load; reading the
    tables is a small fraction of it."""
    from numba.core import codegen

    library, engine = codegen.CPUCodeLibrary, codegen.JitEngine
    if not all(hasattr(library, name) for name in (
            "_unserialize", "_get_module_for_linking", "enable_object_caching",
            "_set_compiled_object", "_finalize_final_module")) or \
            not all(hasattr(engine, name) for name in ("is_symbol_defined", "_load_defined_symbols")):
        return
    unserialize_parsed = library._unserialize.__func__
    module_for_linking = library._get_module_for_linking
    symbol_defined = engine.is_symbol_defined

    def unserialize(cls, codegen_, state):
        name, kind, data = state
        symbols = defined_symbols(data[0]) if kind == "object" else None
        if symbols is None:
            return unserialize_parsed(cls, codegen_, state)
        self = codegen_.create_library(name)
        self.enable_object_caching()
        self._set_compiled_object(data[0])
        self._unparsed_bitcode = data[1]
        self._finalize_final_module()
        codegen_._engine._defined_symbols |= symbols
        codegen_._engine.__dict__.setdefault("_unparsed_libraries", []).append(self)
        return self

    def get_module_for_linking(self):
        _parse_bitcode(self)
        return module_for_linking(self)

    def is_symbol_defined(self, name):
        if symbol_defined(self, name):
            return True
        unparsed = self.__dict__.get("_unparsed_libraries")
        while unparsed:
            _parse_bitcode(unparsed.pop())
        return symbol_defined(self, name)

    library._unserialize = classmethod(unserialize)
    library._get_module_for_linking = get_module_for_linking
    engine.is_symbol_defined = is_symbol_defined


def _environments_without_imports() -> None:
    """Each compiled function has an environment: its constants, and its module's globals,
    which only code compiled in object mode reads. gblastn compiles none, but numba
    rebuilds a loaded function's environment by importing its module, and the first entry
    point loaded (DUST's, which the query setup waits for) would thereby import numba's
    array and string implementations, holding the GIL. A module not yet imported gets a
    placeholder for its globals."""
    from numba.core import environment

    rebuild_imported = environment._rebuild_env
    if not (hasattr(environment, "lookup_environment") and
            hasattr(environment.Environment, "_memo")):
        return

    def rebuild_env(module_name, consts, env_name):
        if module_name in sys.modules or environment.lookup_environment(env_name) is not None:
            return rebuild_imported(module_name, consts, env_name)
        env = environment.Environment({"__name__": module_name})
        env.consts[:] = consts
        env.env_name = env_name
        environment.Environment._memo[env_name] = env
        return env

    environment._rebuild_env = rebuild_env


def _runtime_from_cache() -> None:
    """numba compiles its runtime's few functions (reference counts, atomic operations) in
    every process, before the first cached entry point (DUST's, on the query setup's path)
    can be loaded. Its machine code is kept beside gblastn's in numba's cache folder,
    keyed as numba keys its own (numba's and llvmlite's versions, the target and the CPU),
    and loaded as an entry point is."""
    import pickle

    import llvmlite
    import numba
    from numba.core import config
    from numba.core.runtime import nrtdynmod

    import hashlib  # here, not at the top: makedb imports this module and needs no OpenSSL

    from .cache_files import write_cache_file

    if not (hasattr(nrtdynmod, "compile_nrt_functions") and
            hasattr(nrtdynmod, "create_nrt_module") and config.CACHE_DIR):
        return

    def cached_runtime(context):
        codegen = context.codegen()
        key = repr((numba.__version__, llvmlite.__version__, codegen.magic_tuple()))
        path = os.path.join(config.CACHE_DIR,
                            f"numba-runtime-{hashlib.sha1(key.encode()).hexdigest()[:16]}.pkl")
        try:
            with open(path, "rb") as stored:
                return codegen.unserialize_library(pickle.load(stored))
        except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError):
            pass
        module, library = nrtdynmod.create_nrt_module(context)
        library.enable_object_caching()
        library.add_ir_module(module)
        library.finalize()
        write_cache_file(path, pickle.dumps(library.serialize_using_object_code()))
        return library

    nrtdynmod.compile_nrt_functions = cached_runtime


def _arrays_typed_without_masks() -> None:
    """numba types an array argument in Python the first time it meets its kind (and every
    time for a read-only one), and checks first that it is not a masked array, which imports
    numpy.ma (holding the GIL, in the warm-up's first call, which the query setup waits
    for). No array is a masked one before numpy.ma is imported: until then the check is
    left out, and the type is worked out as numba does."""
    import numpy as np
    from numba.core import errors, types
    from numba.core.typing import typeof
    from numba.np import numpy_support

    numba_typeof_array = typeof.typeof_impl.dispatch(np.ndarray)
    if numba_typeof_array is not getattr(typeof, "_typeof_ndarray", None):
        return

    def typeof_array(value, context):
        if "numpy.ma" in sys.modules:
            return numba_typeof_array(value, context)
        try:
            dtype = numpy_support.from_dtype(value.dtype)
        except errors.NumbaNotImplementedError:
            return numba_typeof_array(value, context)  # numba's own message
        return types.Array(dtype, value.ndim, numpy_support.map_layout(value),
                           readonly=not value.flags.writeable)

    typeof.typeof_impl.register(np.ndarray)(typeof_array)


def _parse_bitcode(library) -> None:
    """What numba does on loading an entry point, for one whose bitcode was left unparsed."""
    from llvmlite import binding

    bitcode = library.__dict__.pop("_unparsed_bitcode", None)
    if bitcode is not None:
        library._shared_module = binding.parse_bitcode(bitcode)
        library._codegen._engine._load_defined_symbols(library._shared_module)


def defined_symbols(object_code: bytes) -> set | None:
    """The global and weak symbols that a 64-bit little-endian ELF object defines (numba's
    machine code on x86-64 and aarch64 Linux); None for any other object format."""
    if object_code[:6] != b"\x7fELF\x02\x01":
        return None
    sections_at, = struct.unpack_from("<Q", object_code, 0x28)
    header_size, sections = struct.unpack_from("<HH", object_code, 0x3A)
    for index in range(sections):
        _, kind, _, _, offset, size, strings_index, _, _, _ = struct.unpack_from(
            "<IIQQQQIIQQ", object_code, sections_at + index * header_size)
        if kind != 2:  # SHT_SYMTAB
            continue
        strings, = struct.unpack_from(
            "<Q", object_code, sections_at + strings_index * header_size + 0x18)
        names = set()
        for name_at, info, _, section, _, _ in struct.iter_unpack(
                "<IBBHQQ", object_code[offset:offset + size]):
            if section and info >> 4 in (1, 2):  # defined, STB_GLOBAL or STB_WEAK
                start = strings + name_at
                names.add(object_code[start:object_code.index(b"\0", start)].decode())
        return names
    return None


def njit(**options):
    """numba.njit (and `constant_args`: see OneSignatureDispatcher), with the dispatcher
    made on the function's first use: making a dispatcher is not free (its cache's locator
    tries writing a file in the cache folder, and the function's signature is inspected),
    and a search calls a fraction of the functions gblastn defines. A compilation finds
    the stand-ins as it finds dispatchers: numba inlines a function by the `targetoptions`
    and `py_func` it reads from the global, and types the global with typeof (registered
    below)."""
    def decorate(py_func):
        return LazyDispatcher(py_func, options)
    return decorate


def intrinsic(definition):
    """numba.extending.intrinsic(definition), made when a compilation first types it (see
    LazyIntrinsic): a module that defines intrinsics is imported without numba."""
    return LazyIntrinsic(definition)


class LazyIntrinsic:
    """Stands for numba's intrinsic of `definition` (whose body imports what numba types it
    with). numba types a global by its `_numba_type_` before its own registry of globals:
    that of the intrinsic, made on first use."""

    def __init__(self, definition):
        self._definition = definition
        self._made = None
        functools.update_wrapper(self, definition)

    @property
    def _numba_type_(self):
        return self.made()[1]

    def made(self) -> tuple:
        """(numba's intrinsic, its type)."""
        if self._made is None:
            with _MAKING_INTRINSICS:
                if self._made is None:
                    _import_numba()
                    from numba.core.typing.templates import builtin_registry
                    from numba.extending import intrinsic as numba_intrinsic

                    made = numba_intrinsic(self._definition)
                    typed = next(kind for value, kind in reversed(builtin_registry.globals)
                                 if value is made)
                    self._made = (made, typed)
        return self._made

    def __call__(self, *args, **kwargs):
        return self.made()[0](*args, **kwargs)  # numba's message: not usable in Python


_MAKING_INTRINSICS = threading.Lock()
_MAKING = threading.Lock()
MADE = []  # the stand-ins whose dispatchers were made, in order (machine_code's bundle)


class LazyDispatcher:
    """Stands for the numba dispatcher of `py_func` until its first use, then passes every
    call and attribute to it. The module's global of that name becomes the dispatcher
    itself, so later calls from the module skip this stand-in."""

    def __init__(self, py_func, options: dict):
        self.py_func = py_func
        self._options = options
        self._dispatcher = None
        functools.update_wrapper(self, py_func)

    def dispatcher(self):
        if self._dispatcher is None:
            with _MAKING:
                if self._dispatcher is None:
                    numba = _import_numba()
                    _type_stand_ins()
                    made = _make_dispatcher(self.py_func, self._options)
                    names = self.py_func.__globals__
                    if names.get(self.py_func.__name__) is self:
                        names[self.py_func.__name__] = made
                    self._dispatcher = made
                    MADE.append(self)
        return self._dispatcher

    def __call__(self, *args, **kwargs):
        if not kwargs:
            for match, function in self._bundled():
                if match(args):
                    return function(*args)
        return self.dispatcher()(*args, **kwargs)

    def _bundled(self) -> list:
        """The machine-code bundle's (matcher, callable) pairs of this function
        (machine_code), once the bundle is loaded; [] where there is none (the module's
        global then becomes numba's dispatcher at the first call, and calls skip this
        stand-in)."""
        found = self.__dict__.get("_bundled_functions")
        if found is None:
            from .machine_code import functions_for

            found = self._bundled_functions = functions_for(self.py_func.__module__,
                                                            self.py_func.__qualname__)
        return found

    def __getattr__(self, name):
        # a probe for a private name (pytest's collector looks for its markers on every
        # global of a test module) does not make the dispatcher: only its users' names do
        if name.startswith("_") and self.__dict__.get("_dispatcher") is None:
            raise AttributeError(name)
        if name in ("py_func", "_options", "_dispatcher"):
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)

    def __reduce__(self):
        return (_dispatcher_of, (self.py_func.__module__, self.py_func.__qualname__))


def _make_dispatcher(py_func, options: dict):
    """numba.njit(**options)(py_func), as a OneSignatureDispatcher; `constant_args` names
    the parameters whose constants it keeps (a specialisation each)."""
    import inspect

    _import_numba()
    targetoptions = {key: value for key, value in options.items()
                     if key not in ("cache", "constant_args")}
    made = _one_signature_dispatcher()(py_func=py_func, locals={},
                                       targetoptions={**targetoptions, "nopython": True,
                                                      "boundscheck": None})
    constant = set(options.get("constant_args", ()))
    parameters = list(inspect.signature(py_func).parameters)
    made.constant_args = (frozenset(constant),
                          frozenset(parameters.index(name) for name in constant))
    if options.get("cache"):
        made.enable_caching()
    return made


def __getattr__(name):
    if name == "OneSignatureDispatcher":
        return _one_signature_dispatcher()
    raise AttributeError(name)


@functools.lru_cache(maxsize=None)
def _one_signature_dispatcher():
    from numba.core import sigutils, types
    from numba.core.registry import CPUDispatcher

    from . import linked_code

    linked_code.install()
    _at_first_compilation(_slice_size_errors_unformatted)
    _flags_compared_quickly()

    class OneSignatureDispatcher(CPUDispatcher):
        """numba's dispatcher, which compiles a function called from compiled code for its
        arguments' plain types: numba would make a specialisation for each constant an
        argument takes (Literal[int](1), Literal[int](-1), ...), each compiled in full with
        its callees. Only the parameters named in njit's `constant_args` keep their
        constants, where a specialisation pays (a step of +1 or -1 in a DP's inner loop)."""

        constant_args = (frozenset(), frozenset())

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._linking_only = set()  # the signatures compiled for linking only

        def get_call_template(self, args, kws):
            names, positions = self.constant_args
            args = tuple(arg if i in positions else types.unliteral(arg)
                         for i, arg in enumerate(args))
            kws = {name: arg if name in names else types.unliteral(arg)
                   for name, arg in kws.items()}
            with linked_code.typing_a_call():
                return super().get_call_template(args, kws)

        def enable_caching(self):
            self._cache = linked_code.cache_class()(self.py_func)

        def compile(self, sig):
            """numba's compile; for linking where numba types a call from compiled code
            (linked_code). A call from Python replaces a compilation for linking."""
            with linked_code.compiling(self.py_func) as compilation:
                if not compilation.for_linking:
                    args, _ = sigutils.normalize_signature(sig)
                    if tuple(args) in self._linking_only:
                        self._linking_only.discard(tuple(args))
                        del self.overloads[tuple(args)]
                return super().compile(sig)

        def add_overload(self, cres):
            if linked_code.is_linking_only():
                # for compiled callers only: Python's calls miss it and compile in full
                self.overloads[tuple(cres.signature.args)] = cres
                self._linking_only.add(tuple(cres.signature.args))
            else:
                super().add_overload(cres)

    OneSignatureDispatcher.__module__ = __name__
    OneSignatureDispatcher.__qualname__ = "OneSignatureDispatcher"
    return OneSignatureDispatcher


def _at_first_compilation(step) -> None:
    """`step()` as numba starts its first compilation in this process, before any typing:
    a search whose compiled code all comes from the cache never runs it. At once where
    numba announces no compilations."""
    from numba.core import event

    if not (hasattr(event, "Listener") and hasattr(event, "register")):
        step()
        return
    done = []

    class FirstCompilation(event.Listener):
        def on_start(self, ev):
            if not done:
                done.append(True)
                step()

        def on_end(self, ev):
            pass

    event.register("numba:compile", FirstCompilation())


def _slice_size_errors_unformatted() -> None:
    """An assignment of an array to a slice checks the sizes, and numba's CPU target words
    its error with the shapes, formatting strings in compiled code: the first such
    assignment in a process compiled numba's string functions (about 2 s for each of 1 and
    2 dimensions, in each compiling process). Its generic target's error says the same
    without the shapes; a wrong size is a bug in gblastn, never bad input. Done at the
    first compilation: it imports numba's array implementations (0.02 CPU-s), which
    loading cached code does not need."""
    from numba.core.typing.templates import builtin_registry
    from numba.np import arrayobj

    if not hasattr(arrayobj, "raise_with_shape_context"):
        return
    for value, function_type in builtin_registry.globals:
        if value is not arrayobj.raise_with_shape_context:
            continue
        for template in getattr(function_type, "templates", ()):
            if getattr(template, "metadata", {}).get("target") == "CPU":
                template._overload_func = staticmethod(_no_implementation)


def _flags_compared_quickly() -> None:
    """numba's typing keeps each overloaded function's implementations under keys that hold
    the compilation's flags (a TargetConfig), hashed and compared at each lookup: about
    150,000 times in the traceback's compilation, each reading every option's value
    (about 0.8 CPU-s). The hash numba computes is that of the sorted option names (the keys of
    the values' dict), the same for every config of a class: computed once per class. Two
    configs of one class with the same options set compare equal without reading the
    rest; else as numba compares them."""
    from numba.core.targetconfig import TargetConfig

    numba_equal = TargetConfig.__eq__
    hashes = {}

    def hash_of_option_names(self):
        kind = type(self)
        if kind not in hashes:
            hashes[kind] = hash(tuple(sorted(self.options)))
        return hashes[kind]

    def equal(self, other):
        if self is other or (type(self) is type(other) and self._values == other._values):
            return True
        return numba_equal(self, other)

    TargetConfig.__hash__ = hash_of_option_names
    TargetConfig.__eq__ = equal


def _no_implementation(*args):
    return None


def _import_numba():
    """numba, the whole package: a thread that imported one of its modules by name while
    another thread was importing the package could deadlock with it (each holding a module
    that the other's import needs; Python then breaks the tie with an ImportError). The
    package's import waits for the other thread's to end. gblastn's compiled functions are
    then cached by content (compile_cache)."""
    import numba

    from .compile_cache import install_locator

    install_locator()
    return numba


def _dispatcher_of(module: str, qualname: str):
    """A pickled stand-in's dispatcher (found by the function's module and name)."""
    import importlib
    found = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found.dispatcher() if isinstance(found, LazyDispatcher) else found


_STAND_INS_TYPED = []


def _type_stand_ins() -> None:
    """numba types a stand-in met as a global of a function it compiles as the dispatcher it
    stands for (a cache miss compiles the callers of stand-ins). Called with _MAKING held."""
    if _STAND_INS_TYPED:
        return
    from numba.core.typing.typeof import typeof_impl

    @typeof_impl.register(LazyDispatcher)
    def _typeof_stand_in(value, context):
        return typeof_impl(value.dispatcher(), context)

    _STAND_INS_TYPED.append(True)
