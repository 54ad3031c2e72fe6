"""Compiling a function that only compiled code calls: for linking into its callers.

numba compiles a function met in compiled code (a callee) as it compiles one that Python
calls: LLVM's module passes over it and every callee linked into it, then its machine code.
Its caller links the callee's LLVM IR into its own module and optimises and generates code
for the whole again, and so on up the call chain (the traceback's is seven levels deep): most
of LLVM's work in the first search went into callees' modules and machine code that no one
ran. The callee's own machine code runs only if Python calls it with those types.

So a function compiled while numba types a call to it from compiled code is compiled for
linking: its IR gets numba's function passes only (its callers' module passes optimise it
with them), and its machine code comes from LLVM's unoptimised code generator. Such a
compilation is kept in numba's cache under a key of its own, and is not made callable from
Python: a call from Python compiles (or loads) the function in full, as before. A compiled
callee finds a full compilation in the cache first (another process's, say), then one for
linking.
"""

import contextlib
import functools
import threading

_state = threading.local()


class _Compilation:
    """One dispatcher's compilation in progress: whether for linking, and whether what it
    came to (compiled, or loaded from the cache) is for linking only."""

    def __init__(self, name: str, for_linking: bool):
        self.name = name
        self.for_linking = for_linking
        self.linking_only = for_linking


def _stack(name: str) -> list:
    found = getattr(_state, name, None)
    if found is None:
        found = []
        setattr(_state, name, found)
    return found


@contextlib.contextmanager
def typing_a_call():
    """numba types a call from compiled code: a compilation it starts is for linking."""
    typing = _stack("typing")
    typing.append(True)
    try:
        yield
    finally:
        typing.pop()


@contextlib.contextmanager
def compiling(py_func):
    """A dispatcher's compile(), for linking when numba is typing a call to it."""
    typing = _stack("typing")
    compilation = _Compilation(py_func.__qualname__, bool(typing) and typing[-1])
    compilations = _stack("compilations")
    compilations.append(compilation)
    typing.append(False)  # the function's own body is typed for its own compilation
    try:
        yield compilation
    finally:
        typing.pop()
        compilations.pop()


def _current():
    compilations = _stack("compilations")
    return compilations[-1] if compilations else None


def _library_for_linking(library) -> bool:
    """Whether `library` is the code of a function being compiled for linking (not numba's
    runtime or another library that its compilation happens to make)."""
    compilation = _current()
    return (compilation is not None and compilation.for_linking and
            library.name == compilation.name)


@functools.lru_cache(maxsize=None)
def cache_class():
    """numba's cache of compile results, with a key of its own for compilations for
    linking, and a compiled callee's lookup trying the full compilation's key first."""
    from numba.core.caching import FunctionCache

    class LinkingAwareCache(FunctionCache):
        def _index_key(self, sig, codegen):
            key = super()._index_key(sig, codegen)
            compilation = _current()
            if compilation is not None and compilation.linking_only:
                return key + ("for linking",)
            return key

        def load_overload(self, sig, target_context):
            compilation = _current()
            if compilation is None or not compilation.for_linking:
                return super().load_overload(sig, target_context)
            compilation.linking_only = False
            found = super().load_overload(sig, target_context)
            if found is None:
                compilation.linking_only = True
                found = super().load_overload(sig, target_context)
            return found

    return LinkingAwareCache


def is_linking_only() -> bool:
    """Whether the compile result being added to a dispatcher is for linking only."""
    compilation = _current()
    return compilation is not None and compilation.linking_only


_INSTALLED = []


def install() -> None:
    """numba's code generation, made to compile for linking what is compiled for linking.
    Called once numba is imported, before anything compiles."""
    if _INSTALLED:
        return
    from numba.core import codegen

    library = codegen.CPUCodeLibrary
    if not all(hasattr(library, name) for name in (
            "_optimize_final_module", "_finalize_final_module")) or \
            not hasattr(codegen.JITCPUCodegen, "_customize_tm_options"):
        _INSTALLED.append(False)
        return
    optimize_final_module = library._optimize_final_module
    finalize_final_module = library._finalize_final_module
    unoptimised = []

    def optimize_unless_for_linking(self):
        if not _library_for_linking(self):
            optimize_final_module(self)

    def finalize_with_unoptimised_code(self):
        if not (_library_for_linking(self) and getattr(self, "_object_caching_enabled", False)
                and getattr(self, "_compiled_object", None) is None):
            return finalize_final_module(self)
        if not unoptimised:
            unoptimised.append(_unoptimised_target_machine(self._codegen))
        machine_code = unoptimised[0].emit_object(self._final_module)
        # numba's JIT takes the library's object code from its object cache instead of
        # generating its own, and the cache keeps it
        self._compiled_object = machine_code
        finalize_final_module(self)
        self._compiled_object = machine_code
        self._compiled = True
        return None

    library._optimize_final_module = optimize_unless_for_linking
    library._finalize_final_module = finalize_with_unoptimised_code
    _compile_numba_helpers_for_linking()
    _INSTALLED.append(True)


def _compile_numba_helpers_for_linking() -> None:
    """numba's own implementations of numpy and Python functions (np.empty, sorting, ...)
    are closures that numba compiles for the function being compiled, which links them in:
    compiled for linking too, as they are never called from Python. They are not cached."""
    from numba.core import dispatcher

    compile_in_full = dispatcher.Dispatcher.compile

    def compile_helpers_for_linking(self, sig):
        name = getattr(self.py_func, "__qualname__", "")
        if _current() is None or "<locals>" not in name or \
                not getattr(self.py_func, "__module__", "").startswith("numba."):
            return compile_in_full(self, sig)
        compilation = _Compilation(name, True)
        compilation.linking_only = False  # numba's own dispatcher: no key of its own
        compilations = _stack("compilations")
        compilations.append(compilation)
        try:
            return compile_in_full(self, sig)
        finally:
            compilations.pop()

    dispatcher.Dispatcher.compile = compile_helpers_for_linking


def _unoptimised_target_machine(numba_codegen):
    """A target machine as numba's JIT's (the same CPU, features and code model), with
    LLVM's code generation unoptimised."""
    import llvmlite.binding as ll

    options = {"opt": 0}
    numba_codegen._customize_tm_options(options)
    return ll.Target.from_triple(ll.get_process_triple()).create_target_machine(**options)
