"""Compiling gblastn's CPU stages before a search needs them.

numba compiles each stage at its first call and keeps the machine code (compile_cache).
The first search of a task in a cache says so on stderr and compiles before its progress
bar starts, over two processes: a child compiles the traceback (the largest stage) from
its declared argument types while this process runs the made-up search of engine.warm_up
up to the traceback; then the whole made-up search runs, loading what both compiled.
`gblastn warmup` does the same ahead of any search, then has a child process per task write
its machine-code bundle (write_bundles), and writes the bytecode of the modules a search
imports where an install left it out. A marker file per task and -device, keyed
by the package's sources, records that a task's stages were compiled.

`python -m gblastn.compile_ahead TASK` is the traceback's child, `... TASK bundle DEVICE
GPU_ID` a bundle's.
"""

import gc
import os
import re
import subprocess
import sys
import threading
from concurrent.futures import wait

from .compile_cache import numba_cache_dir, source_keys
from .errors import OptionsError
from .options import TASKS, make_options
DEVICES = ("auto", "cpu", "gpu")
GREEDY_LINEAR, GREEDY_AFFINE = "greedy_linear", "greedy_affine"
# CPU seconds of a task's first compilation on the 2-core development machine, and how
# many of its CPUs the two compiling processes keep busy on average (docs/perf/coldstart.md),
# for the notice's estimate of its wall time
COMPILE_CPU_SECONDS = {"megablast": 45, "dc-megablast": 41, "blastn": 51, "blastn-short": 51}
COMPILE_PARALLELISM = 1.7

# how long the warm-up of a -device auto search waits for the scan backend's set-up to know
# which machine-code bundle to load (0.1-0.2 s on an H200 host); past it, the stages go to
# numba, so that a set-up that itself called a stage could never wait for the bundle forever
SET_UP_WAIT_SECONDS = 5

# threads a search keeps busy from its start to its first scan: the reader's masks and the
# planner's first batch (docs/perf/start-up.md)
START_UP_BUSY_THREADS = 2

_DTYPES = {"i64": "int64", "u64": "uint64", "u32": "uint32", "u8": "uint8", "f64": "float64",
           "bool": "boolean", "none": "none"}


# the packages a search imports: gblastn and its dependencies
SEARCH_PACKAGES = ("gblastn", "numpy", "numba", "llvmlite", "typer", "click", "rich",
                   "shellingham", "typing_extensions", "lmdb", "pycuda", "pytools",
                   "platformdirs")


def write_bytecode(packages: tuple = SEARCH_PACKAGES) -> None:
    """Write the bytecode of `packages` where it is missing or stale, as pip writes it when it
    installs them, on every core. Without it (`pip install --no-compile`, or an editable
    install where PYTHONDONTWRITEBYTECODE is set) every search compiles the sources of all
    it imports again: kleb's 160 queries on a GPU host took 1.20-1.56 s without it, 0.68-0.85
    s with it (docs/perf/traceback.md).
    Packages that are not installed, and folders that cannot be written, are passed by."""
    import compileall
    import importlib.util

    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        if spec.submodule_search_locations:
            compileall.compile_dir(os.path.dirname(spec.origin), quiet=2, workers=0)
        else:
            compileall.compile_file(spec.origin, quiet=2)


def marker_path(task: str, device: str) -> str:
    return os.path.join(numba_cache_dir(),
                        f"compiled-{task}-{device}-{source_keys().package_key()}")


def bundle_path(task: str, device: str = "cpu") -> str:
    """The task's machine-code bundle (machine_code) for searches whose scan runs on
    `device` (cpu or gpu: a GPU's searches call other CPU stages), as of the package's
    sources."""
    return os.path.join(numba_cache_dir(),
                        f"machine-code-{task}-{device}-{source_keys().package_key()}.pkl")


def is_compiled(task: str, device: str) -> bool:
    """Whether this cache holds the stages that the task's searches with `-device` (auto,
    cpu or gpu: the GPU's searches compile other CPU stages) use, as of the package's
    sources."""
    return os.path.exists(marker_path(task, device))


def _mark_compiled(task: str, devices: tuple) -> None:
    from .cache_files import write_cache_file

    for device in devices:
        write_cache_file(marker_path(task, device), b"")


def notice(task: str) -> str:
    """The line a first compilation prints: what, about how long, that it happens once."""
    from .pools import available_cores

    cpu_seconds = COMPILE_CPU_SECONDS.get(task, max(COMPILE_CPU_SECONDS.values()))
    seconds = cpu_seconds / min(COMPILE_PARALLELISM, available_cores())
    return (f"gblastn: compiling the CPU code for -task {task}, once (about {seconds:.0f} s; "
            f"kept in {numba_cache_dir()})")


def stages_before_search(task: str, device: str, word_size: int | None,
                         query_letters: int | None, backend):
    """What a search runs before its first query. When the task's stages are compiled in
    this cache: nothing (they are loaded in a background thread meanwhile, while the GPU
    and the database are prepared: from the machine-code bundle of the task on the search's
    device where there is one, without numba), and None is returned. Else a function that
    compiles them, which the search calls once its outputs and database are found in order.
    `backend`: the Future of the scan backend's set-up."""
    if task not in TASKS or device not in DEVICES or is_compiled(task, device):
        # numba's import and its loads make most of the objects (about a million) that the
        # search's modules hold, none of them garbage: the collector's passes over them as
        # they are made (0.04-0.06 CPU-s) are left out until the stages are loaded and
        # frozen (or a compilation, which makes garbage, starts after all)
        gc.disable()
        bundle = _bundle_for(task, device, backend) if task in TASKS else None
        if bundle is not None:
            from .machine_code import expect

            expect(bundle)  # the warm-up loads it, the stages' calls wait
        threading.Thread(target=_load_stages, name="gblastn-warm-up", daemon=True,
                         args=(task, word_size, query_letters, backend, True, True)).start()
        return None

    def compile_stages():
        compile_task(task, device, backend, word_size, query_letters)
    return compile_stages


def compile_task(task: str, device: str, backend, word_size: int | None = None,
                 query_letters: int | None = None) -> None:
    """Compile the task's stages now, saying so: the traceback in a child process while
    this one runs engine.warm_up's made-up search up to it, then the whole made-up search,
    loading what both compiled. Marks them compiled for the device asked for and the one
    it came to."""
    print(notice(task), file=sys.stderr, flush=True)
    on_one_stack_chunk(_compile_task, task, device, backend, word_size, query_letters)


def _compile_task(task: str, device: str, backend, word_size: int | None,
                  query_letters: int | None) -> None:
    from .numba_start import lighten_numba_start

    child = _start_traceback_child(task)
    try:
        # before the first compilation sets numba's runtime up: its machine code is then
        # cached, and this search can write the task's machine-code bundle (after_search)
        lighten_numba_start()
        if child is not None and make_options(task).greedy:
            # this process's share of what both need, done before its first stage
            _compile_greedy_aligner(GREEDY_AFFINE)
        _load_stages(task, word_size, query_letters, backend, trace=False)
    except BaseException:
        if child is not None:
            child.kill()  # an interrupt or a failure ends the search at once
            child.wait()
        raise
    if child is not None:
        child.wait()  # what it compiled, the next warm-up loads
    _load_stages(task, word_size, query_letters, backend, trace=True)
    _mark_compiled(task, (device, _device_of(backend)))


def after_search(task: str, device: str, backend) -> None:
    """After a search that numba loaded stages for (all of them, or those its bundle
    lacked): the machine-code bundle (machine_code) of the task on the device the search
    ran on, with what the search called, so that later searches call it without importing
    numba. The compiling search writes it too."""
    from .machine_code import bundle_expected, write_bundle
    from .numba_start import MADE

    if task not in TASKS or not MADE or not is_compiled(task, device):
        return
    path = bundle_path(task, _device_of(backend))
    if os.path.exists(path) and not bundle_expected():
        return  # numba loaded the stages because no bundle was expected in time
    from .compile_cache import installed_versions

    write_bundle(path, list(MADE), installed_versions())


def load_compiled_stages(task: str, backend) -> None:
    """Load the task's stages (engine.warm_up's made-up search) in a process that serves
    searches, a served cluster's worker, ahead of the first one, where this cache holds them
    compiled for the backend's device; nothing where it does not (the first search
    compiles them, saying so)."""
    if is_compiled(task, backend.name):
        _load_stages(task, None, None, backend, trace=True)


def load_first_bundle(task: str, device: str) -> bool:
    """For a process that searches through the Python API: the machine-code bundle of the
    task on the device loaded, where this cache holds one (the command line's searches and
    `gblastn warmup` write them) and numba was not imported yet; whether its entry points
    are in use. One bundle a process: a later task's stages go to numba, as does every
    call of a process that imported it."""
    from .machine_code import bundle_expected, expect, load_expected

    if bundle_expected() or "numba" in sys.modules or task not in TASKS:
        return False
    path = bundle_path(task, device)
    if not os.path.exists(path):
        return False
    expect(path)
    return load_expected()


def _load_stages(task: str, word_size: int | None, query_letters: int | None, backend,
                 trace: bool, announce: bool = False) -> None:
    """engine.warm_up's made-up search with the task's tables and aligners, and the stages
    that `backend` calls for: numba's first call in a process sets up its type system,
    and each stage's first call loads its machine code (or compiles it). With `announce`
    (stages_before_search's loading, beside a search), a compilation after all says so,
    and the collector, paused meanwhile, resumes at the end; and a search on the CPU of a
    machine with no core beyond its start-up's busy threads gets numba imported and no
    made-up search: with no GPU's set-up to wait beside, it would take a core from the
    search's first batch, whose stages load the same code as they come
    (docs/perf/start-up.md). A machine-code bundle that stages_before_search expects is
    loaded instead of all that (machine_code)."""
    from .machine_code import load_expected

    if announce and load_expected():  # first: the stages' first calls wait for it
        gc.freeze()
        gc.enable()
        return  # numba is not imported: the stages call the bundle's machine code
    from .engine import warm_up
    from .numba_start import lighten_numba_start
    from .pools import available_cores

    try:
        lighten_numba_start()
        if announce:
            announce_compilations(task)
        if announce and available_cores() <= START_UP_BUSY_THREADS and \
                _device_of(backend) == "cpu":
            return  # numba is imported (announce_compilations' listener)
        warm_up(make_options(task, word_size=word_size), query_letters, backend, trace)
    finally:
        # the imported modules' and numba's objects (about a million) never become garbage:
        # kept out of the collector's full passes, each of which held the GIL for tens of ms
        gc.freeze()
        if announce:
            gc.enable()


def _bundle_for(task: str, device: str, backend):
    """The machine-code bundle a search is to load: its path where the device is known now
    (`-device cpu` or `gpu`, whose search fails without one, or a scan backend already set
    up), else a function that waits for the GPU's set-up (0.1-0.2 s, while numba's import
    alone takes 0.17 CPU-s) and gives the bundle of the device it came to; None where this
    cache holds no bundle for the task."""
    if device != "auto" or (backend is not None and backend.done()):
        path = bundle_path(task, device if device != "auto" else _device_of(backend))
        return path if os.path.exists(path) else None
    if backend is None or not any(os.path.exists(bundle_path(task, each))
                                  for each in ("cpu", "gpu")):
        return None

    def once_set_up() -> str | None:
        if not wait([backend], timeout=SET_UP_WAIT_SECONDS).done:
            return None
        path = bundle_path(task, _device_of(backend))
        return path if os.path.exists(path) else None
    return once_set_up


def _device_of(backend) -> str:
    """'cpu' or 'gpu': what the Future of the scan backend's set-up came to."""
    try:
        return backend.result().name
    except Exception:  # noqa: BLE001 - no device: the search reports it
        return "cpu"


def announce_compilations(task: str) -> None:
    """Print the notice when numba starts compiling after all (a task marked compiled in a
    cache shared with another kind of CPU, say): the search goes on meanwhile."""
    from numba.core import event

    class FirstCompilation(event.Listener):
        said = False

        def on_start(self, ev):
            if not self.said:
                FirstCompilation.said = True
                gc.enable()
                print(notice(task), file=sys.stderr, flush=True)

        def on_end(self, ev):
            pass

    event.register("numba:compile", FirstCompilation())


def on_one_stack_chunk(function, *args):
    """function(*args), its frames and their callees' kept in one chunk of Python's frame
    stack. Python (3.11 and later) keeps frames in chunks of 16 KiB and frees a chunk as
    soon as the frame at its start returns: numba's compilation recurses deeply, and
    where a chunk's edge fell at a depth that its loops cross, every crossing mapped and
    unmapped a chunk (0.7 million times in the traceback's compilation: a fifth of its
    CPU time, in the kernel). The frame of _reserving_frame_stack holds a stack of over
    1 MiB that it never uses (its pages are never touched): Python gives it a chunk of
    2 MiB, and the frames called from it fit in the rest."""
    return _reserving_frame_stack(function, *args)


def _reserving_frame_stack(function, *args):
    return function(*args)


_reserving_frame_stack.__code__ = _reserving_frame_stack.__code__.replace(
    co_stacksize=140_000)  # 8-byte slots


def _start_traceback_child(task: str):
    from .pools import available_cores

    if available_cores() < 2:
        return None
    try:
        return subprocess.Popen([sys.executable, "-m", "gblastn.compile_ahead", task],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=None if os.environ.get("GBLASTN_DEBUG") else
                                subprocess.DEVNULL)
    except OSError:
        return None  # this process compiles it all


def numba_types(arguments: str) -> tuple:
    """numba types of a declared argument list: `i64` a scalar, `i64[2]` a C-contiguous
    array of 2 dimensions, `u8[1]r` a read-only one, `none` None, `(i64,u64)` a tuple."""
    from numba.core import types

    found = []
    for token in arguments.split():
        if token.startswith("("):  # a tuple: (i64,u64)
            found.append(types.Tuple(numba_types(token[1:-1].replace(",", " "))))
            continue
        match = re.fullmatch(r"([a-z0-9]+)(?:\[(\d)\](r?))?", token)
        dtype = getattr(types, _DTYPES[match.group(1)])
        if match.group(2) is None:
            found.append(dtype)
        else:
            found.append(types.Array(dtype, int(match.group(2)), "C",
                                     readonly=bool(match.group(3))))
    return tuple(found)


def compile_traceback(task: str) -> None:
    """Compile the traceback's compiled call for `task`, as a search of it calls it; for
    megablast the greedy aligner for linear gap costs first (for linking)."""
    from .traceback import _trace_group, trace_group_arguments

    greedy = make_options(task).greedy
    if greedy:
        _compile_greedy_aligner(GREEDY_LINEAR)
    _trace_group.compile(numba_types(trace_group_arguments(greedy)))


def _compile_greedy_aligner(which: str) -> None:
    """A greedy aligner (GREEDY_LINEAR or GREEDY_AFFINE gap costs), as its callers link it:
    the other process's stages that call it load it from the cache instead of compiling it
    too. Each process compiles one before the rest, which the other needs later."""
    from . import greedy, linked_code

    with linked_code.typing_a_call():
        getattr(greedy, which).compile(numba_types(getattr(greedy, which.upper() + "_ARGUMENTS")))


def write_bundles(tasks: list, device: str, gpu_id: int = 0) -> None:
    """The machine-code bundle of each task (compiled in this cache), each written by a
    child process of its own at once (`python -m gblastn.compile_ahead TASK bundle DEVICE
    GPU_ID`): in one process that loaded several tasks' stages, every task's bundle would
    hold them all, and each search would load all of them. A bundle that cannot be written
    only leaves a first search to numba, which writes it then."""
    children = []
    for task in tasks:
        try:
            children.append(subprocess.Popen(
                [sys.executable, "-m", "gblastn.compile_ahead", task, "bundle", device,
                 str(gpu_id)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=None if os.environ.get("GBLASTN_DEBUG") else subprocess.DEVNULL))
        except OSError:
            pass
    for child in children:
        child.wait()


def _write_bundle(task: str, device: str, gpu_id: int) -> None:
    """A child of write_bundles: the task's made-up search (engine.warm_up) with the scan
    backend of `device`, loading its stages as a search's warm-up does, then the bundle of
    what it called, as after_search writes it."""
    from .pools import beside
    from .scan import select_backend

    backend = beside(select_backend, device, gpu_id)
    _load_stages(task, None, None, backend, trace=True)
    after_search(task, device, backend)


def main(argv: list) -> int:
    if len(argv) == 4 and argv[0] in TASKS and argv[1] == "bundle" and argv[2] in DEVICES \
            and argv[3].isdigit():
        _write_bundle(argv[0], argv[2], int(argv[3]))
        return 0
    if len(argv) != 1 or argv[0] not in TASKS:
        raise OptionsError(f"usage: python -m gblastn.compile_ahead {{{','.join(TASKS)}}} "
                           f"[bundle {{{','.join(DEVICES)}}} GPU_ID]")
    from .numba_start import skip_numba_extras

    skip_numba_extras()
    on_one_stack_chunk(compile_traceback, argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
