"""Functions compiled for linking (gblastn.linked_code): a callee compiled while its caller
compiles serves compiled callers only; a call from Python compiles it in full, in this
process and in a later one (the cache keeps the two apart); a full compilation in the cache
serves a compiled caller too; results are those of the plain functions."""

import os
import subprocess
import sys

MODULE = """
import numpy as np

from gblastn.numba_start import njit


@njit(cache=True, nogil=True)
def leaf(values, i):
    return values[i] * 2


@njit(cache=True, nogil=True)
def top(values):
    total = 0
    for i in range(values.size):
        total += leaf(values, i)
    return total


@njit(cache=True, nogil=True)
def other_top(values):
    return leaf(values, 1) - leaf(values, 0)


VALUES = np.arange(10)


def signature():
    return (leaf.signatures or [None])[0]


def compilations(dispatcher):
    return sum(dispatcher.stats.cache_misses.values())


def loads(dispatcher):
    return sum(dispatcher.stats.cache_hits.values())
"""

CALLER_FIRST = """
from linked import VALUES, compilations, leaf, signature, top

assert top(VALUES) == 90
assert signature() in leaf._linking_only, "the callee was compiled in full"
assert compilations(leaf) == 1
assert leaf(VALUES, 3) == 6
assert not leaf._linking_only, "a call from Python ran the callee compiled for linking"
assert compilations(leaf) == 2
print("ok")
"""

IR_ONLY = """
from gblastn.linked_code import LinkedOnly
from linked import VALUES, leaf, signature, top

assert top(VALUES) == 90
entry_point = leaf.overloads[signature()].entry_point
assert isinstance(entry_point, LinkedOnly), "the callee compiled for linking has machine code"
print("ok")
"""

OTHER_CALLER = """
from linked import VALUES, compilations, leaf, loads, other_top

assert other_top(VALUES) == 2 and compilations(other_top) == 1
assert loads(leaf) == 1 and compilations(leaf) == 0, "the callee's IR was not loaded"
print("ok")
"""

CALLER_ONLY = """
from linked import VALUES, leaf, signature, top

assert top(VALUES) == 90 and signature() in leaf._linking_only
print("ok")
"""

LATER_PROCESS = """
from linked import VALUES, compilations, leaf, loads, top

assert top(VALUES) == 90 and loads(top) == 1 and compilations(top) == 0
assert leaf(VALUES, 4) == 8
assert compilations(leaf) == 1, "a call from Python loaded the callee compiled for linking"
print("ok")
"""

CALLEE_FIRST = """
from linked import VALUES, leaf

assert leaf(VALUES, 3) == 6
print("ok")
"""

CALLER_AFTER = """
from linked import VALUES, compilations, leaf, loads, top

assert top(VALUES) == 90 and compilations(top) == 1
assert loads(leaf) == 1 and compilations(leaf) == 0, "the callee's full compilation was not used"
assert not leaf._linking_only
print("ok")
"""


def _python(code: str, folder, cache) -> None:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_callee_compiled_for_linking_is_compiled_in_full_for_python(tmp_path):
    (tmp_path / "linked.py").write_text(MODULE)
    cache = tmp_path / "cache"
    _python(CALLER_FIRST, tmp_path, cache)
    later = tmp_path / "later"  # the first cache holds the callee's full compilation now
    _python(CALLER_ONLY, tmp_path, later)
    _python(LATER_PROCESS, tmp_path, later)


def test_a_later_caller_links_the_callee_s_ir_from_the_cache(tmp_path):
    (tmp_path / "linked.py").write_text(MODULE)
    cache = tmp_path / "cache"
    _python(IR_ONLY, tmp_path, cache)
    _python(OTHER_CALLER, tmp_path, cache)


def test_a_compiled_caller_links_the_callee_s_full_compilation(tmp_path):
    (tmp_path / "linked.py").write_text(MODULE)
    cache = tmp_path / "cache"
    _python(CALLEE_FIRST, tmp_path, cache)
    _python(CALLER_AFTER, tmp_path, cache)
