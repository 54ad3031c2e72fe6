"""Compiling a function that only compiled code calls: for linking into its callers.

numba compiles a function met in compiled code (a callee) as it compiles one that Python
calls: LLVM's module passes over it and every callee linked into it, its machine code, and
wrappers for Python's calls. Its caller links the callee's LLVM IR into its own module and
optimises and generates code for the whole again, and so on up the call chain (the
traceback's is seven levels deep): most of that work went into code that no one ran. The
callee's own machine code runs only if Python calls it with those types.

So a function compiled while numba types a call to it from compiled code is compiled for
linking: to LLVM IR with numba's function passes, as numba compiles its own subroutines, and
no further (its callers' module passes optimise it with them, once, at the entry point).
Such a compilation is kept in numba's cache as its IR, under a key of its own, and is not
made callable from Python: a call from Python compiles (or loads) the function in full, as
before. A compiled callee finds a full compilation in the cache first (another process's,
say), then one for linking. numba's own subroutines and helper closures, which are only
ever linked, get no machine code either.
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


_LINKED_ONLY = "_gblastn_linked_only"  # the mark of a library that is only ever linked


def _is_linked_only(library) -> bool:
    """Whether `library` is only linked into its callers' code (compiled for linking: a
    callee, or one of numba's own subroutines), never run itself."""
    return getattr(library, _LINKED_ONLY, False)


def _mark_linked_only(library) -> None:
    setattr(library, _LINKED_ONLY, True)


class LinkedOnly:
    """The entry point of a function compiled for linking: it has no machine code. numba
    finds a compiled callee's code under its dispatcher's entry point, so each such
    compilation has an object of its own; it is never called (Python's calls compile the
    function in full)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"<{self.name}, compiled for linking>"


@functools.lru_cache(maxsize=None)
def cache_class():
    """numba's cache of compile results, with a key of its own for compilations for
    linking, and a compiled callee's lookup trying the full compilation's key first."""
    from numba.core import compiler
    from numba.core.caching import CompileResultCacheImpl, FunctionCache

    class LinkingAwareCacheImpl(CompileResultCacheImpl):
        """A compilation for linking is kept as its LLVM IR (bitcode), and comes back as
        such: numba's own rebuild would look up its machine code."""

        def rebuild(self, target_context, payload):
            if payload[0][1] != _LINKING_KIND:
                return super().rebuild(target_context, payload)
            libdata, fndesc, env, signature, objectmode, lifted, typeann, reload_init, \
                referenced_envs = payload
            for init in reload_init:
                init()
            return compiler.compile_result(
                target_context=target_context, typing_context=target_context.typing_context,
                library=target_context.codegen().unserialize_library(libdata),
                environment=env, entry_point=LinkedOnly(fndesc.qualname), fndesc=fndesc,
                type_annotation=typeann, signature=signature, objectmode=objectmode,
                lifted=lifted, reload_init=reload_init, referenced_envs=referenced_envs)

    class LinkingAwareCache(FunctionCache):
        _impl_class = LinkingAwareCacheImpl

        def _index_key(self, sig, codegen):
            key = super()._index_key(sig, codegen)
            compilation = _current()
            if compilation is not None and compilation.linking_only:
                return key + ("for linking", _LINKING_KIND)
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
_LINKING_KIND = "llvm-ir"  # how a library compiled for linking is kept in the cache


def install() -> None:
    """numba's code generation, made to compile for linking what is compiled for linking.
    Called once numba is imported, before anything compiles."""
    if _INSTALLED:
        return
    from numba.core import base, codegen, dispatcher, typed_passes

    library = codegen.CPUCodeLibrary
    if not all(hasattr(library, name) for name in (
            "_optimize_final_module", "_finalize_final_module", "_finalize_dynamic_globals",
            "_verify_declare_only_symbols", "serialize_using_object_code", "_unserialize")) or \
            not hasattr(dispatcher._FunctionCompiler, "_customize_flags") or \
            not hasattr(dispatcher._FunctionCompiler, "_compile_core") or \
            not hasattr(typed_passes.BaseNativeLowering, "run_pass") or \
            not hasattr(base.BaseContext, "insert_user_function"):
        _INSTALLED.append(False)
        return
    _linked_libraries_without_machine_code()
    _compile_numba_helpers_for_linking()
    _compile_to_ir_for_linking()
    _INSTALLED.append(True)


def _compile_to_ir_for_linking() -> None:
    """A function compiled for linking is lowered to LLVM IR and no further (numba's
    `no_compile`, as numba compiles its own subroutines): no machine code, and none of the
    wrappers that let Python (and C, through a pointer) call it, each a function of its own
    that numba built in Python and LLVM then optimised and compiled with the rest. Its
    library is marked as only linked, and its entry point is a LinkedOnly."""
    from numba.core import dispatcher, typed_passes

    compiler = dispatcher._FunctionCompiler
    customize_flags, compile_core = compiler._customize_flags, compiler._compile_core
    lower = typed_passes.BaseNativeLowering.run_pass

    def for_linking(py_func) -> bool:
        compilation = _current()
        return (compilation is not None and compilation.for_linking and
                compilation.name == getattr(py_func, "__qualname__", None))

    def flags_for_linking(self, flags):
        flags = customize_flags(self, flags)
        if for_linking(self.py_func):
            flags.no_compile = True
            flags.no_cpython_wrapper = True
            flags.no_cfunc_wrapper = True
        return flags

    def compile_with_linked_entry_point(self, args, return_type):
        cres = compile_core(self, args, return_type)
        if cres.entry_point is None and not cres.objectmode:
            entry_point = LinkedOnly(cres.fndesc.qualname)
            cres = cres._replace(entry_point=entry_point)
            cres.target_context.insert_user_function(entry_point, cres.fndesc, [cres.library])
        return cres

    def lower_marking_linked_libraries(self, state):
        done = lower(self, state)
        if state.flags.no_compile:
            _mark_linked_only(state.library)
        return done

    def add_overload(self, cres):
        if isinstance(cres.entry_point, LinkedOnly):
            self.overloads[tuple(cres.signature.args)] = cres  # for compiled callers only
        else:
            add_callable_overload(self, cres)

    add_callable_overload = dispatcher.Dispatcher.add_overload
    dispatcher.Dispatcher.add_overload = add_overload
    compiler._customize_flags = flags_for_linking
    compiler._compile_core = compile_with_linked_entry_point
    typed_passes.BaseNativeLowering.run_pass = lower_marking_linked_libraries


def _linked_libraries_without_machine_code() -> None:
    """A library that is only linked (functions compiled for linking, numba's subroutines)
    is finalised as far as its callers need: its callees linked in, no optimisation (its
    callers' module passes optimise it with them, once, at the entry point) and no machine
    code. It is cached as its IR."""
    from numba.core import codegen
    from numba.core.environment import lookup_environment

    library = codegen.CPUCodeLibrary
    optimize_final_module = library._optimize_final_module
    finalize_final_module = library._finalize_final_module
    serialize = library.serialize_using_object_code
    unserialize = library._unserialize.__func__

    def optimize_unless_linked_only(self):
        if not _is_linked_only(self):
            optimize_final_module(self)

    def finalize_without_machine_code(self):
        if not _is_linked_only(self):
            finalize_final_module(self)
            _set_linked_environments(self, lookup_environment)
            return
        self._finalize_dynamic_globals()
        self._verify_declare_only_symbols()
        self._finalized = True

    def serialize_as_ir(self):
        if not _is_linked_only(self):
            return serialize(self)
        self._ensure_finalized()
        return (self.name, _LINKING_KIND, self._get_module_for_linking().as_bitcode())

    def unserialize_ir(cls, codegen_, state):
        name, kind, data = state
        if kind != _LINKING_KIND:
            return unserialize(cls, codegen_, state)
        import llvmlite.binding as ll

        self = codegen_.create_library(name)
        _mark_linked_only(self)
        self._final_module = self._shared_module = ll.parse_bitcode(data)
        self._finalized = True
        return self

    library._optimize_final_module = optimize_unless_linked_only
    library._finalize_final_module = finalize_without_machine_code
    library.serialize_using_object_code = serialize_as_ir
    library._unserialize = classmethod(unserialize_ir)


def _set_linked_environments(library, lookup_environment) -> None:
    """The environments of the functions linked into a library that runs, set as numba
    sets a cached library's (numba sets only the function's own after a compilation)."""
    for variable in library._final_module.global_variables:
        if variable.name.startswith("_ZN08NumbaEnv"):
            env = lookup_environment(variable.name)
            if env is not None:
                library._codegen.set_env(variable.name, env)


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

