"""Compiling ahead: the traceback's declared argument types are a search's own, a first
search says once that it compiles, `gblastn warmup` compiles ahead, `-version`, the
collector resumes after a search's background load, which runs a made-up search only where
it takes no core from the search."""

import contextlib
import gc
import os
import re
import shutil
import subprocess
import sys

import pytest

from golden import megablast_case
from gblastn.compile_ahead import TASKS, is_compiled, marker_path, numba_types, on_one_stack_chunk
from gblastn.compile_cache import numba_cache_dir
from gblastn.errors import OptionsError


def test_declared_types_read():
    from numba.core import types

    found = numba_types("i64 u8[1]r f64[2] none bool (u64,i64)")
    assert found == (types.int64, types.Array(types.uint8, 1, "C", readonly=True),
                     types.Array(types.float64, 2, "C"), types.none, types.boolean,
                     types.Tuple((types.uint64, types.int64)))


@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_declared_traceback_types_are_a_searchs_own(task):
    from gblastn.engine import warm_up
    from gblastn.options import make_options
    from gblastn.traceback import _trace_group, trace_group_arguments

    options = make_options(task)
    assert warm_up(options) > 0  # the made-up search traced, as a search does
    declared = numba_types(trace_group_arguments(options.greedy))
    assert list(_trace_group.signatures) and declared in _trace_group.signatures


def test_declared_greedy_aligner_types_are_their_callers_own():
    """The aligners as greedy_one_way (in every search's gapped stage and traceback) calls
    them: types its calls, which loads or compiles the aligners for the types it finds."""
    import numba
    import numpy as np

    from gblastn.greedy import GREEDY_AFFINE_ARGUMENTS, GREEDY_LINEAR_ARGUMENTS, \
        greedy_affine, greedy_linear, greedy_one_way
    from gblastn.wordrun import pack_query_words

    letters = np.zeros(64, dtype=np.uint8)
    bases, ambiguous = pack_query_words(letters)
    numba.njit(greedy_one_way.py_func)(letters, bases, ambiguous, 0, 64, letters, 0, 64, False,
                                       False, 20, 1, -2, 0, 0, True, -1)
    assert numba_types(GREEDY_LINEAR_ARGUMENTS) in greedy_linear.signatures
    assert numba_types(GREEDY_AFFINE_ARGUMENTS) in greedy_affine.signatures


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A database, a query and a cache holding the megablast stages but no marker, no
    machine-code bundle and no numba runtime, as a first search would find them after a
    compilation (copied, so no test compiles it all again)."""
    from gblastn.db.writer import make_db
    from gblastn.engine import warm_up
    from gblastn.options import make_options

    warm_up(make_options("megablast"))
    folder = tmp_path_factory.mktemp("compile_ahead")
    db_fasta, queries = megablast_case(str(folder))
    cache = folder / "cache"
    shutil.copytree(numba_cache_dir(), cache,
                    ignore=shutil.ignore_patterns("compiled-*", "machine-code-*",
                                                  "numba-runtime-*"))
    return {"db": make_db([db_fasta], str(folder / "db"), progress=False),
            "query": queries["small"], "cache": str(cache), "folder": folder}


def _gblastn(seeded, *args):
    env = {**os.environ, "NUMBA_CACHE_DIR": seeded["cache"]}
    return subprocess.run([sys.executable, "-m", "gblastn", *args], capture_output=True,
                          text=True, env=env, timeout=600)


def _bundle(seeded, task):
    from gblastn.compile_ahead import bundle_path

    with _cache_of(seeded):
        return bundle_path(task)


@contextlib.contextmanager
def _cache_of(seeded):
    old = os.environ.get("NUMBA_CACHE_DIR")
    os.environ["NUMBA_CACHE_DIR"] = seeded["cache"]
    try:
        yield
    finally:
        if old is None:
            del os.environ["NUMBA_CACHE_DIR"]
        else:
            os.environ["NUMBA_CACHE_DIR"] = old


def _compiled(seeded, task, device="cpu"):
    with _cache_of(seeded):
        return is_compiled(task, device), marker_path(task, device)


def test_a_first_search_says_once_that_it_compiles(seeded):
    args = ["search", "-task", "megablast", "-db", seeded["db"], "-query", seeded["query"],
            "-device", "cpu"]
    marked, marker = _compiled(seeded, "megablast")
    if marked:
        os.remove(marker)
    first = _gblastn(seeded, *args)
    assert first.returncode == 0, first.stderr
    notices = [line for line in first.stderr.splitlines() if "compiling" in line]
    assert len(notices) == 1 and "-task megablast, once" in notices[0], first.stderr
    assert _compiled(seeded, "megablast")[0]
    assert os.path.exists(_bundle(seeded, "megablast")), "the compiling search wrote no bundle"
    second = _gblastn(seeded, *args)
    assert second.returncode == 0 and "compiling" not in second.stderr, second.stderr
    assert second.stdout == first.stdout and first.stdout.count("\n") > 0


API_SEARCH = """
import sys
import gblastn
results = gblastn.search(sys.argv[1], sys.argv[2], task="megablast")
print(sum(len(result.hsps) for result in results))
"""


def test_the_apis_first_search_says_once_that_it_compiles(seeded):
    """gblastn.search in a cache that does not hold its task compiled says so, as the
    command line does, marks it compiled and writes its bundle; the next says nothing."""
    marked, marker = _compiled(seeded, "megablast")
    if marked:
        os.remove(marker)
    env = {**os.environ, "NUMBA_CACHE_DIR": seeded["cache"]}
    runs = [subprocess.run([sys.executable, "-c", API_SEARCH, seeded["query"], seeded["db"]],
                           capture_output=True, text=True, env=env, timeout=600)
            for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr + runs[1].stderr
    notices = [line for line in runs[0].stderr.splitlines() if "compiling" in line]
    assert len(notices) == 1 and "-task megablast, once" in notices[0], runs[0].stderr
    assert "compiling" not in runs[1].stderr and runs[0].stdout == runs[1].stdout
    assert int(runs[0].stdout) > 20
    assert _compiled(seeded, "megablast")[0] and os.path.exists(_bundle(seeded, "megablast"))


def test_warmup_compiles_ahead_once(seeded):
    """Its stages, once; and the bytecode an install left out (here one module's, removed)."""
    import importlib.util

    import gblastn.fasta

    bytecode = importlib.util.cache_from_source(gblastn.fasta.__file__)
    if os.access(os.path.dirname(os.path.dirname(bytecode)), os.W_OK):
        with contextlib.suppress(FileNotFoundError):
            os.remove(bytecode)
    marked, marker = _compiled(seeded, "megablast")
    if marked:
        os.remove(marker)
    bundle = _bundle(seeded, "megablast")
    if os.path.exists(bundle):
        os.remove(bundle)
    done = _gblastn(seeded, "warmup", "-task", "megablast", "-device", "cpu")
    assert done.returncode == 0, done.stderr
    assert re.search(r"-task megablast compiled in \d+ s", done.stderr), done.stderr
    assert os.path.exists(bundle), "the warm-up wrote no machine-code bundle"
    assert os.path.exists(bytecode) or not os.access(os.path.dirname(bytecode), os.W_OK)
    again = _gblastn(seeded, "warmup", "-task", "megablast", "-device", "cpu")
    assert again.returncode == 0 and "-task megablast is compiled" in again.stderr


def test_bytecode_written_for_packages_installed_without_it(tmp_path, monkeypatch):
    """write_bytecode (gblastn warmup) writes each module's bytecode where it is missing, and
    passes by packages that are not installed."""
    import importlib.util

    from gblastn.compile_ahead import write_bytecode

    package = tmp_path / "bytecode_probe"
    (package / "inner").mkdir(parents=True)
    sources = [package / "__init__.py", package / "inner" / "__init__.py",
               package / "inner" / "leaf.py"]
    for source in sources:
        source.write_text("VALUE = 1\n")
    single = tmp_path / "bytecode_probe_module.py"
    single.write_text("VALUE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    write_bytecode(("bytecode_probe", "bytecode_probe_module", "no_such_package_here"))
    for source in [*sources, single]:
        assert os.path.exists(importlib.util.cache_from_source(str(source))), source


@pytest.mark.parametrize("args", [["megablast", "bundle", "tpu", "0"], ["nonsense"],
                                  ["megablast", "bundle", "cpu"]])
def test_the_compiling_children_refuse_other_arguments(args):
    from gblastn.compile_ahead import main

    with pytest.raises(OptionsError, match="usage: python -m gblastn.compile_ahead"):
        main(args)


@pytest.mark.parametrize("args", [["-task", "dc-nonsense"], ["-task", "megablast", "-bogus"]])
def test_warmup_refuses_bad_options(seeded, args):
    done = _gblastn(seeded, "warmup", *args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("gblastn: error:") == 1 and "Traceback" not in done.stderr


def test_compilation_runs_below_a_frame_reserving_a_stack_chunk():
    def reserved_below():
        return sys._getframe(1).f_code.co_stacksize

    assert on_one_stack_chunk(divmod, 7, 2) == (3, 1)
    assert on_one_stack_chunk(reserved_below) * 8 > 1 << 20


@pytest.mark.parametrize("fails", [False, True])
def test_the_collector_resumes_after_the_background_load(monkeypatch, fails):
    """stages_before_search pauses the collector for the stages' loading: it resumes when
    they are loaded, and when the loading fails."""
    from gblastn import compile_ahead, engine, pools

    def made_up_search(*args):
        if fails:
            raise RuntimeError("no stages")

    monkeypatch.setattr(engine, "warm_up", made_up_search)
    monkeypatch.setattr(pools, "available_cores", lambda: 8)  # the made-up search runs
    monkeypatch.setattr(compile_ahead, "announce_compilations", lambda task: None)
    gc.disable()
    try:
        if fails:
            with pytest.raises(RuntimeError):
                compile_ahead._load_stages("megablast", None, None, None, True, True)
        else:
            compile_ahead._load_stages("megablast", None, None, None, True, True)
        assert gc.isenabled()
    finally:
        gc.unfreeze()  # the load froze the test process's objects
        gc.enable()


@pytest.mark.parametrize("cores, device, made_up", [(1, "cpu", False), (2, "cpu", False),
                                                    (3, "cpu", True), (2, "gpu", True)])
def test_the_made_up_search_runs_only_beside_a_gpu_or_on_a_free_core(monkeypatch, cores,
                                                                     device, made_up):
    """A CPU search on a machine of two cores or fewer gets no made-up search beside it (it
    would take a core from the reader's masks or the first batch's table); one with a core
    more, or beside a GPU's set-up, does."""
    from concurrent.futures import Future

    from gblastn import compile_ahead, engine, pools

    searched = []
    monkeypatch.setattr(engine, "warm_up", lambda *args: searched.append(args))
    monkeypatch.setattr(compile_ahead, "announce_compilations", lambda task: None)
    monkeypatch.setattr(pools, "available_cores", lambda: cores)
    backend = Future()
    backend.set_result(type("Backend", (), {"name": device})())
    gc.disable()
    try:
        compile_ahead._load_stages("megablast", None, None, backend, True, True)
    finally:
        gc.unfreeze()
        gc.enable()
    assert bool(searched) == made_up


def test_tasks_are_the_searchs():
    from gblastn.options import make_options

    for task in TASKS:
        assert make_options(task).task == task


@pytest.mark.parametrize("flag", ["-version", "--version"])
def test_version_as_blastn_prints_it(flag):
    from gblastn import __version__

    done = subprocess.run([sys.executable, "-m", "gblastn", flag], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.splitlines() == [
        f"gblastn: {__version__}",
        f" Package: gblastn {__version__}, results of BLAST+ 2.12.0"]


def test_a_set_up_that_never_ends_leaves_the_stages_to_numba(tmp_path, monkeypatch):
    """-device auto: the bundle is chosen once the scan backend is set up, but not waited for
    past SET_UP_WAIT_SECONDS (no bundle then: the stages go to numba)."""
    from concurrent.futures import Future

    from gblastn import compile_ahead

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_ahead, "SET_UP_WAIT_SECONDS", 0.05)
    for device in ("cpu", "gpu"):
        with open(compile_ahead.bundle_path("megablast", device), "wb"):
            pass
    pending = Future()
    choose = compile_ahead._bundle_for("megablast", "auto", pending)
    assert callable(choose) and choose() is None
    pending.set_result(type("Backend", (), {"name": "gpu"})())
    assert choose() == compile_ahead.bundle_path("megablast", "gpu")

