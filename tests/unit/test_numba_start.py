"""numba's start-up cut down (gblastn.numba_start): cached compiled code loaded without its
bitcode, with placeholders for the globals of modules not imported and with numba's runtime
from the cache, still runs, links into a later compilation, and answers numba's symbol
lookups as the parsed bitcode would; arrays are typed as numba types them; the dispatchers'
stand-ins compile, load, pass attributes and pickle as the dispatchers they become."""

import os
import subprocess
import sys
import textwrap

import pytest

from gblastn.numba_start import LazyDispatcher, defined_symbols
from gblastn.numba_start import njit as lazy_njit

MODULE = """
import numba
import numpy as np

@numba.njit(cache=True)
def triple(x):
    return 3 * x

@numba.njit(cache=True)
def total(n):
    return np.arange(n).sum()
"""

START = """
import sys
from gblastn.numba_start import lighten_numba_start, skip_numba_extras
skip_numba_extras()
import numba
lighten_numba_start()
"""

COMPILE = START + """
assert "importlib.metadata" not in sys.modules, "numba looked for extensions"
import cached
cached.triple(2)
cached.total(4)
"""

LOAD_THEN_LINK = START + """
from numba.core.runtime import nrtdynmod

def compiled_again(context):
    raise AssertionError("numba's runtime was compiled again")

nrtdynmod.create_nrt_module = compiled_again
import cached

assert cached.triple(2) == 6
assert cached.total(4) == 6
assert "numba.np.arrayobj" not in sys.modules, "an environment imported its module"
assert "numpy.ma" not in sys.modules, "typing an array imported numpy.ma"
assert "importlib.metadata" not in sys.modules, "numba looked for extensions"
library = cached.triple.overloads[cached.triple.signatures[0]].library
assert "_unparsed_bitcode" in vars(library), "the bitcode was parsed on loading"
engine = library._codegen._engine
name = cached.triple.overloads[cached.triple.signatures[0]].fndesc.llvm_func_name
assert engine.is_symbol_defined(name)


@numba.njit
def triple_plus_one(x):
    return cached.triple(x) + 1


assert triple_plus_one(2) == 7
assert "_unparsed_bitcode" not in vars(library), "linking did not parse the bitcode"
print("loaded and linked")
"""


def _python(code: str, folder, cache) -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cached_code_loads_and_links_without_its_bitcode(tmp_path):
    """Compiled in one process; loaded, with numba's runtime, in another."""
    (tmp_path / "cached.py").write_text(MODULE)
    cache = tmp_path / "cache"
    written = _python(textwrap.dedent(COMPILE), tmp_path, cache)
    assert written.returncode == 0, written.stderr
    assert any(name.endswith(".nbc") for name in os.listdir(next(cache.rglob("*.nbi")).parent))
    assert list(cache.glob("numba-runtime-*.pkl"))

    loaded = _python(textwrap.dedent(LOAD_THEN_LINK), tmp_path, cache)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "loaded and linked"


def test_machine_code_symbols_are_among_the_bitcodes():
    import numba

    @numba.njit
    def add_one(values):
        return values + 1

    add_one(1)
    library = add_one.overloads[add_one.signatures[0]].library
    object_code = library._get_compiled_object()
    symbols = defined_symbols(object_code)
    if symbols is None:
        pytest.skip("numba's machine code here is not 64-bit little-endian ELF")
    module = library._final_module
    in_bitcode = {value.name for values in (module.functions, module.global_variables)
                  for value in values if not value.is_declaration}
    fndesc = add_one.overloads[add_one.signatures[0]].fndesc
    assert symbols <= in_bitcode
    assert {fndesc.llvm_func_name, fndesc.llvm_cpython_wrapper_name} <= symbols


def test_arrays_are_typed_as_numba_types_them():
    import numpy as np
    from numba.core.typing.typeof import typeof

    from gblastn.numba_start import lighten_numba_start

    lighten_numba_start()
    read_only = np.zeros(10, np.uint8)
    read_only.flags.writeable = False
    assert str(typeof(read_only)) == "readonly array(uint8, 1d, C)"
    assert str(typeof(np.zeros((2, 3), order="F"))) == "array(float64, 2d, F)"
    assert str(typeof(np.zeros(4)[::2])) == "array(float64, 1d, A)"
    with pytest.raises(Exception, match="Unsupported array dtype"):
        typeof(np.zeros(2, dtype="V3"))


def test_other_object_formats_are_left_to_numba():
    assert defined_symbols(b"\xcf\xfa\xed\xfe" + bytes(60)) is None  # Mach-O
    assert defined_symbols(b"\x7fELF\x01\x01" + bytes(58)) is None  # 32-bit ELF


STAND_INS = """
from gblastn.numba_start import njit


@njit(cache=True, nogil=True, inline="always")
def twice(x):
    return 2 * x


@njit(cache=True, nogil=True)
def plus_one(x):
    return x + 1


@njit(cache=True, nogil=True)
def twice_plus_one(x):
    return plus_one(twice(x))
"""

USE_STAND_INS = START + """
import threading

import stand_ins
from gblastn.numba_start import LazyDispatcher

assert isinstance(stand_ins.twice_plus_one, LazyDispatcher), "made at import"
calls = [stand_ins.twice_plus_one] * 4
results = [None] * len(calls)

def call(i):
    results[i] = calls[i](i)

threads = [threading.Thread(target=call, args=(i,)) for i in range(len(calls))]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
assert results == [2 * i + 1 for i in range(len(calls))], results
made = stand_ins.twice_plus_one
assert not isinstance(made, LazyDispatcher), "the module's global is still the stand-in"
assert made is calls[0].dispatcher(), "threads made different dispatchers"
assert len(made.signatures) == 1
print("compiled" if made.stats.cache_misses else "loaded")
"""


def test_stand_ins_compile_load_and_become_dispatchers(tmp_path):
    """Functions decorated with numba_start.njit are made on first use, by whichever thread
    comes first; a caller compiles with its callees found through their stand-ins (one
    inlined, one called), and a second process loads it from the cache."""
    (tmp_path / "stand_ins.py").write_text(STAND_INS)
    cache = tmp_path / "cache"
    first = _python(textwrap.dedent(USE_STAND_INS), tmp_path, cache)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "compiled"
    second = _python(textwrap.dedent(USE_STAND_INS), tmp_path, cache)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "loaded"


@lazy_njit(nogil=True)
def _add_two(x):
    return x + 2


def test_stand_in_passes_attributes_and_pickles_as_its_dispatcher():
    import pickle

    from numba.core.dispatcher import Dispatcher

    assert isinstance(_add_two, LazyDispatcher)
    assert _add_two.__name__ == "_add_two" and _add_two.py_func(1) == 3
    assert _add_two.targetoptions["nogil"]  # the dispatcher's, made on asking
    restored = pickle.loads(pickle.dumps(_add_two))
    assert isinstance(restored, Dispatcher) and restored(1) == 3
    assert globals()["_add_two"] is restored


PATCHED = START + """
import numpy as np
from numba.core import caching, codegen, dispatcher, environment, serialize, typed_passes
from numba.core.targetconfig import TargetConfig
from numba.core.runtime import nrtdynmod
from numba.core.typing import typeof
from gblastn.compile_cache import install_locator
from gblastn.numba_start import _make_dispatcher
install_locator()
made = _make_dispatcher(lambda x: x, {})
made(1)  # the slices' errors are replaced as the first compilation starts
from numba.core.typing.templates import builtin_registry
from numba.np import arrayobj
slice_errors = [template._overload_func for value, function in builtin_registry.globals
                if value is arrayobj.raise_with_shape_context for template in function.templates
                if template.metadata.get("target") == "CPU"]
ours = [
    *slice_errors,
    codegen.CPUCodeLibrary._optimize_final_module,
    codegen.CPUCodeLibrary._finalize_final_module,
    codegen.CPUCodeLibrary.serialize_using_object_code,
    codegen.CPUCodeLibrary._unserialize.__func__,
    dispatcher._FunctionCompiler._customize_flags,
    dispatcher._FunctionCompiler._compile_core,
    dispatcher.Dispatcher.add_overload,
    typed_passes.BaseNativeLowering.run_pass,
    TargetConfig.__hash__,
    TargetConfig.__eq__,
    caching.Cache.load_overload,
    codegen.CPUCodeLibrary._get_module_for_linking,
    codegen.JitEngine.is_symbol_defined,
    environment._rebuild_env,
    nrtdynmod.compile_nrt_functions,
    typeof.typeof_impl.dispatch(np.ndarray),
    caching.IndexDataCacheFile.save,
]
impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
print(sum(f.__module__.startswith("gblastn.") for f in ours), len(ours),
      getattr(impl._locator_classes[0], "_gblastn_keyed", False), type(made).__name__)
"""


def test_every_patch_of_numba_takes_effect_on_the_pinned_numba(tmp_path):
    """gblastn's start-up replaces numba internals that pyproject pins numba's version for;
    each replacement is skipped where numba's internals differ, which this test would show
    on a numba whose internals moved."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", PATCHED], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    patched, total, keyed, dispatcher = done.stdout.split()
    assert patched == total
    assert keyed == "True"
    assert dispatcher == "OneSignatureDispatcher"


SLICE_SIZES = START + """
from numba.core import event
from gblastn.numba_start import njit
import numpy as np

compiled = []

class Compiled(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__module__)

    def on_end(self, ev):
        pass

event.register("numba:compile", Compiled())

@njit()
def assign(to, values, rows):
    to[:values.shape[0]] = values
    rows[:values.shape[0], :] = rows[values.shape[0]:, :]

assign(np.zeros(4), np.ones(2), np.zeros((4, 2)))
try:
    assign(np.zeros(1), np.ones(2), np.zeros((4, 2)))
except ValueError as error:
    print(error, "|", *sorted(set(name for name in compiled if "unicode" in name)))
"""


def test_a_slice_of_the_wrong_size_is_an_error_without_compiling_strings(tmp_path):
    done = _python(SLICE_SIZES, tmp_path, tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cannot assign slice from input of different size |"


def test_compiler_flags_hash_and_compare_as_numba_s():
    """The flags in numba's typing keys, hashed once per class: the same hash as numba's,
    and equal where numba's are (an option set to its default included)."""
    from numba.core.compiler import Flags

    from gblastn.numba_start import _one_signature_dispatcher

    _one_signature_dispatcher()
    plain, explicit = Flags(), Flags()
    explicit.nrt = Flags.options["nrt"].default
    assert plain == explicit and hash(plain) == hash(explicit)
    assert hash(plain) == hash(tuple(sorted(plain.values())))
    explicit.nrt = not explicit.nrt
    assert plain != explicit


def test_the_stages_modules_import_without_numba():
    """Their intrinsics are made when a compilation first types them (numba_start.intrinsic):
    a process that has its compiled code from elsewhere needs no numba to import them."""
    code = ("import sys; import gblastn.engine, gblastn.traceback, gblastn.scan.cpu, "
            "gblastn.greedy, gblastn.dynprog; "
            "assert 'numba' not in sys.modules and 'llvmlite' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
