"""The machine-code bundle (gblastn/machine_code.py): arguments are checked as numba types
them; a search after one whose stages numba loaded writes its device's bundle, and the
next searches call it without importing numba, with the same output (on the CPU, on the
default device, on a GPU); a call of other types goes to numba; a bundle for other
versions is left alone."""

import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from golden import megablast_case
from gblastn import machine_code
from gblastn.compile_cache import numba_cache_dir


def _spec_of(kind):
    return machine_code._argument_spec(kind)


def test_arrays_and_scalars_match_as_numba_types_them():
    from numba.core import types
    from numba.core.typing.typeof import typeof

    values = [np.zeros(3, dtype=np.int64), np.zeros((2, 3), dtype=np.int32),
              np.zeros((2, 3), dtype=np.float64, order="F"), np.zeros((4, 4))[:, 1],
              np.zeros(3, dtype=np.uint8)[::2], 7, -(1 << 62), 2.5, True, np.int32(3),
              np.float32(1), np.bool_(False), None, (1, 2), (1, 2.0, np.zeros(2))]
    readonly = np.zeros(5, dtype=np.uint16)
    readonly.flags.writeable = False
    values.append(readonly)
    for value in values:
        spec = _spec_of(typeof(value))
        assert spec is not None, value
        assert machine_code.matches((spec,), (value,)), value
        others = [other for other in values if typeof(other) != typeof(value)]
        assert not any(machine_code.matches((spec,), (other,)) for other in others), value
    assert _spec_of(types.Array(types.int64, 1, "C", aligned=False)) is not None
    assert _spec_of(typeof(np.zeros(2, dtype=[("a", "i4")]))) is None


def test_arrays_match_whatever_their_alignment_flag():
    """numba types every array as aligned: an unaligned view calls the same code."""
    from numba.core.typing.typeof import typeof

    buffer = np.zeros(17, dtype=np.uint8)
    unaligned = buffer[1:].view(np.int64)
    assert not unaligned.flags.aligned
    assert machine_code.matches((_spec_of(typeof(np.zeros(2, dtype=np.int64))),), (unaligned,))


def test_arrays_of_equal_dtypes_of_two_objects_match_alike():
    """int64 has two dtype objects on Linux (long, longlong): both match the same spec,
    as numba types both as int64."""
    from numba.core.typing.typeof import typeof

    spec = (_spec_of(typeof(np.zeros(2, dtype=np.int64))),)
    for kind in (np.int64, np.longlong, np.dtype("<i8")):
        assert machine_code.matches(spec, (np.zeros(3, dtype=kind),)), kind
    assert not machine_code.matches(spec, (np.zeros(3, dtype=np.uint64),))


def test_a_big_python_int_and_a_wrong_count_do_not_match():
    spec = (("i", 64, True),)
    assert machine_code.matches(spec, (1 << 62,))
    assert not machine_code.matches(spec, (1 << 63,))
    assert not machine_code.matches(spec, (1, 2))


def test_a_bundle_of_other_versions_is_not_loaded(tmp_path):
    path = tmp_path / "bundle.pkl"
    path.write_bytes(pickle.dumps({"version": machine_code.BUNDLE_VERSION,
                                   "versions": "numba=0.0", "entries": []}))
    assert machine_code._load(str(path))[2] == {}


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    """A database, a query and a cache holding the megablast stages, marked compiled for the
    CPU (copied, so no test compiles them again)."""
    from gblastn.compile_ahead import _mark_compiled
    from gblastn.db.writer import make_db
    from gblastn.engine import warm_up
    from gblastn.options import make_options

    warm_up(make_options("megablast"))
    folder = tmp_path_factory.mktemp("machine_code")
    db_fasta, queries = megablast_case(str(folder))
    cache = folder / "cache"
    shutil.copytree(numba_cache_dir(), cache,
                    ignore=shutil.ignore_patterns("compiled-*", "machine-code-*"))
    old = os.environ.get("NUMBA_CACHE_DIR")
    os.environ["NUMBA_CACHE_DIR"] = str(cache)
    try:
        from gblastn.compile_ahead import bundle_path

        # and for the default device and the GPU, whose searches compile what they lack
        _mark_compiled("megablast", ("cpu", "auto", "gpu"))
        bundle = bundle_path("megablast")
        gpu_bundle = bundle_path("megablast", "gpu")
    finally:
        if old is None:
            del os.environ["NUMBA_CACHE_DIR"]
        else:
            os.environ["NUMBA_CACHE_DIR"] = old
    return {"db": make_db([db_fasta], str(folder / "db"), progress=False),
            "query": queries["small"], "cache": str(cache), "bundle": bundle,
            "gpu_bundle": gpu_bundle}


SEARCH = """
import os, sys
leave = os._exit
def told(code):
    print("numba imported" if "numba.core.dispatcher" in sys.modules else "numba not imported",
          file=sys.stderr)
    leave(code)
os._exit = told
sys.argv = ["gblastn"] + sys.argv[1:]
from gblastn.__main__ import main
main()
"""


def _search(cached, out, device="cpu"):
    env = {**os.environ, "NUMBA_CACHE_DIR": cached["cache"]}
    done = subprocess.run([sys.executable, "-c", SEARCH, "search", "-task", "megablast",
                           "-db", cached["db"], "-query", cached["query"], "-outfmt", "6",
                           "-device", device, "-num_threads", "2", "-out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stderr.strip().splitlines()[-1], out.read_bytes()


def test_the_search_after_numbas_writes_the_bundle_and_the_next_call_it(cached, tmp_path):
    told, by_numba = _search(cached, tmp_path / "numba.tsv")
    assert told == "numba imported"
    assert os.path.exists(cached["bundle"])
    for run in range(2):
        told, bundled = _search(cached, tmp_path / f"bundle{run}.tsv")
        assert told == "numba not imported"
        assert bundled == by_numba and by_numba


API_SEARCH = """
import sys
if sys.argv[3:] == ["numba first"]:
    import numba
import gblastn
from gblastn import machine_code
results = gblastn.search(sys.argv[1], sys.argv[2], task="megablast", num_threads=2)
print([(r.id, [(h.hit_id, h.score, h.query_start, h.hit_start) for h in r.hsps])
       for r in results])
print("bundle" if machine_code.bundle_expected() else "no bundle", file=sys.stderr)
print("numba imported" if "numba.core.dispatcher" in sys.modules else "numba not imported",
      file=sys.stderr)
"""


def test_the_apis_first_search_in_a_process_calls_the_bundle(cached, tmp_path):
    """gblastn.search in a fresh process loads the task's CPU bundle that a command-line
    search wrote, as the command line does, and adds what numba loaded beside it (stages
    of another batch's kind): the next one imports no numba, with the same results; in a
    process that imported numba the search leaves the bundle alone."""
    from gblastn import search

    if not os.path.exists(cached["bundle"]):
        _search(cached, tmp_path / "numba.tsv")
    env = {**os.environ, "NUMBA_CACHE_DIR": cached["cache"]}

    def api_search(*first):
        done = subprocess.run([sys.executable, "-c", API_SEARCH, cached["query"],
                               cached["db"], *first], capture_output=True, text=True,
                              env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip(), done.stderr.strip().splitlines()[-2:]

    api_search()
    found, told = api_search()
    assert told == ["bundle", "numba not imported"]
    expected = search(cached["query"], cached["db"], task="megablast", num_threads=2)
    assert found == str([(r.id, [(h.hit_id, h.score, h.query_start, h.hit_start)
                                 for h in r.hsps]) for r in expected])
    assert sum(len(r.hsps) for r in expected) > 20
    assert api_search("numba first") == (found, ["no bundle", "numba imported"])


def test_a_search_on_the_default_device_calls_the_bundle_of_the_one_it_came_to(
        cached, tmp_path):
    """-device auto: the device is not known when the stages start loading; the warm-up
    waits for the scan backend's set-up and loads that device's bundle (written by the
    first such search where there was none)."""
    if not os.path.exists(cached["bundle"]):
        _search(cached, tmp_path / "numba.tsv")
    _, by_cpu = _search(cached, tmp_path / "cpu.tsv")
    _search(cached, tmp_path / "first.tsv", "auto")
    for run in range(2):
        told, bundled = _search(cached, tmp_path / f"auto{run}.tsv", "auto")
        assert told == "numba not imported"
        assert bundled == by_cpu and by_cpu


@pytest.mark.gpu
def test_a_gpu_search_writes_the_gpu_bundle_and_the_next_calls_it(cached, tmp_path):
    """The GPU path's CPU stages (the query setup, the gapped and traceback stages, the
    output) from a bundle of their own; output identical to the CPU search's."""
    from gblastn.errors import GpuUnavailableError
    from gblastn.scan.gpu import backend_for

    try:
        backend_for(0)
    except GpuUnavailableError as exc:
        pytest.skip(str(exc))
    if os.path.exists(cached["gpu_bundle"]):
        os.remove(cached["gpu_bundle"])
    _, by_cpu = _search(cached, tmp_path / "cpu.tsv")
    told, by_numba = _search(cached, tmp_path / "numba.tsv", "gpu")
    assert told == "numba imported"
    assert os.path.exists(cached["gpu_bundle"])
    for run in range(2):
        told, bundled = _search(cached, tmp_path / f"gpu{run}.tsv", "gpu")
        assert told == "numba not imported"
        assert bundled == by_numba == by_cpu and by_cpu


CALLS = """
import sys
import numpy as np
from gblastn import machine_code
machine_code.expect(sys.argv[1])
assert machine_code.load_expected()
from gblastn.wordrun import pack_query_words
letters = np.array([0, 1, 2, 3, 14, 0, 1, 2] * 9, dtype=np.uint8)
bundled = pack_query_words(letters)
assert "numba.core.dispatcher" not in sys.modules
read_only = letters.copy()
read_only.flags.writeable = False
by_numba = pack_query_words(read_only)
assert "numba.core.dispatcher" in sys.modules
assert all(np.array_equal(a, b) for a, b in zip(bundled, by_numba))
print("equal")
"""


def test_a_call_of_other_types_goes_to_numba_with_the_same_result(cached, tmp_path):
    if not os.path.exists(cached["bundle"]):
        _search(cached, tmp_path / "numba.tsv")
    env = {**os.environ, "NUMBA_CACHE_DIR": cached["cache"]}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(CALLS), cached["bundle"]],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "equal"


def test_a_search_that_did_not_expect_the_bundle_leaves_it_alone(cached, tmp_path, monkeypatch):
    """A search whose device was not known in time loads its stages through numba: the
    bundle it did not expect is not written again."""
    from gblastn import compile_ahead, numba_start

    if not os.path.exists(cached["bundle"]):
        _search(cached, tmp_path / "numba.tsv")
    written = []
    monkeypatch.setenv("NUMBA_CACHE_DIR", cached["cache"])
    monkeypatch.setattr(machine_code, "_BUNDLE", None)
    monkeypatch.setattr(machine_code, "write_bundle", lambda *args: written.append(args))
    monkeypatch.setattr(numba_start, "MADE", [object()])
    monkeypatch.setattr(compile_ahead, "_device_of", lambda backend: "cpu")
    monkeypatch.setattr(compile_ahead, "is_compiled", lambda task, device: True)
    compile_ahead.after_search("megablast", "auto", None)
    assert written == []
    machine_code.expect(cached["bundle"])
    compile_ahead.after_search("megablast", "auto", None)
    assert len(written) == 1
