"""The compiled-code cache is keyed by content: an edit of a callee in another module is
seen, unrelated modules load from the cache, a copy of the same code elsewhere compiles
nothing; keys follow a module's imports and the library versions, processes compiling at
once lose no entry, and a function numba cannot cache still runs."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

from gblastn.compile_cache import SourceKeys

CALLEE = """\
from numba import njit


@njit(cache=True)
def step(x):
    return x + 1
"""

CALLER = """\
from numba import njit

from .callee import step


@njit(cache=True)
def scaled(x):
    return step(x) * 10
"""

OTHER = """\
from numba import njit


@njit(cache=True)
def halved(x):
    return x // 2


def later():
    from .callee import step  # a Python function's import: not in compiled code
    return step
"""

RUN = """\
import json, sys
from gblastn.numba_start import _import_numba
from gblastn.compile_cache import key_package
_import_numba()
key_package("kpkg", sys.argv[1] + "/kpkg")
sys.path.insert(0, sys.argv[1])
from kpkg.caller import scaled
from kpkg.other import halved
result = {"scaled": scaled(1), "halved": halved(8)}
result["compiled"] = sorted(name for name, d in (("scaled", scaled), ("halved", halved))
                            if sum(d.stats.cache_misses.values()))
print(json.dumps(result))
"""


def _package(root, callee=CALLEE):
    folder = root / "kpkg"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "callee.py").write_text(callee)
    (folder / "caller.py").write_text(CALLER)
    (folder / "other.py").write_text(OTHER)
    return folder


def _run(root, cache):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", RUN, str(root)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_an_edited_callee_is_seen_and_the_rest_loads_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    folder = _package(tmp_path / "a")
    first = _run(tmp_path / "a", cache)
    assert first == {"scaled": 20, "halved": 4, "compiled": ["halved", "scaled"]}
    assert _run(tmp_path / "a", cache)["compiled"] == []

    # same size, same time: only the content tells
    callee = folder / "callee.py"
    stamp = callee.stat()
    callee.write_text(CALLEE.replace("x + 1", "x + 2"))
    os.utime(callee, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    edited = _run(tmp_path / "a", cache)
    assert edited == {"scaled": 30, "halved": 4, "compiled": ["scaled"]}


def test_the_same_code_elsewhere_compiles_nothing(tmp_path):
    cache = tmp_path / "cache"
    _package(tmp_path / "a")
    _run(tmp_path / "a", cache)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert _run(tmp_path / "b", cache)["compiled"] == []


def _keys(tmp_path, callee=CALLEE):
    folder = _package(tmp_path, callee)
    return SourceKeys("kpkg", str(folder), salt="versions")


def test_keys_follow_module_level_imports(tmp_path):
    before = _keys(tmp_path / "a")
    after = _keys(tmp_path / "b", CALLEE.replace("x + 1", "x + 2"))
    assert before.closure("kpkg.caller") == {"kpkg.caller", "kpkg.callee"}
    assert before.closure("kpkg.other") == {"kpkg.other"}  # its import is inside a function
    assert before.key("kpkg.caller") != after.key("kpkg.caller")
    assert before.key("kpkg.callee") != after.key("kpkg.callee")
    assert before.key("kpkg.other") == after.key("kpkg.other")
    assert before.package_key() != after.package_key()


def test_keys_change_with_the_versions(tmp_path):
    folder = _package(tmp_path)
    one = SourceKeys("kpkg", str(folder), salt="numba=1")
    two = SourceKeys("kpkg", str(folder), salt="numba=2")
    assert one.key("kpkg.other") != two.key("kpkg.other")


def test_continued_and_grouped_imports_are_followed(tmp_path):
    folder = _package(tmp_path)
    (folder / "grouped.py").write_text(textwrap.dedent("""\
        \"\"\"A docstring line
        from which nothing is imported.\"\"\"
        from .callee import (
            step,
        )
        from . import other, \\
            caller
        """))
    keys = SourceKeys("kpkg", str(folder), salt="")
    assert keys.closure("kpkg.grouped") == {"kpkg.grouped", "kpkg.callee", "kpkg.other",
                                            "kpkg.caller"}


CONCURRENT = """\
import sys, time
import numpy as np
from gblastn.numba_start import _import_numba
from gblastn.compile_cache import key_package
_import_numba()
key_package("kpkg", sys.argv[1] + "/kpkg")
sys.path.insert(0, sys.argv[1])
from kpkg.other import halved
kinds = [getattr(np, name) for name in sys.argv[3].split(",")]
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # all start together
for kind in kinds:
    halved(kind(8))
print(sum(halved.stats.cache_misses.values()))
"""

KINDS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float32"]


def test_processes_compiling_at_once_lose_no_entry(tmp_path):
    """Each process adds its own signatures of one function to the function's index."""
    import time

    _package(tmp_path)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    start = f"{time.time() + 3:.3f}"
    running = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(tmp_path), start, kind],
                                env=env, stdout=subprocess.PIPE, text=True)
               for kind in KINDS]
    assert [int(p.communicate(timeout=300)[0]) for p in running] == [1] * len(KINDS)
    again = subprocess.run([sys.executable, "-c", CONCURRENT, str(tmp_path), "0",
                            ",".join(KINDS)], env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0 and int(again.stdout) == 0, again.stderr


UNCACHABLE = """\
import ctypes

from numba import njit

_abs = ctypes.CDLL(None).abs
_abs.restype = ctypes.c_int
_abs.argtypes = (ctypes.c_int,)


@njit(cache=True)
def absolute(x):
    return _abs(x)
"""

RUN_UNCACHABLE = """\
import sys, warnings
from gblastn.numba_start import _import_numba
from gblastn.compile_cache import key_package
_import_numba()
key_package("upkg", sys.argv[1] + "/upkg")
sys.path.insert(0, sys.argv[1])
from upkg.native import absolute
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    print(absolute(-3), any("Cannot cache" in str(w.message) for w in caught))
"""


def test_a_function_numba_cannot_cache_still_runs(tmp_path):
    """numba warns, naming the function's file, when it cannot cache a function (a ctypes
    call, or globals that LLVM did not fold at a low NUMBA_OPT): the keyed locator has it."""
    folder = tmp_path / "upkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "native.py").write_text(UNCACHABLE)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", RUN_UNCACHABLE, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "True"]
