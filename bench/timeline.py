"""Where one search's time goes, thread by thread: a timeline of its timed stages.

    python3 bench/timeline.py record TIMELINE.tsv [--calls MODULE:NAME,...] -- search -db DB
                                 -query Q.fa [options]
    python3 bench/timeline.py show TIMELINE.tsv [--step 0.05] [--threads]

`record` runs `gblastn ARGS` in this process, as `python -m gblastn` does (the device's
context is begun first), and writes one line per timed stage entered by any thread: thread,
stage, start, end (seconds from the process's start). It also records the imports of the
heavy modules, each `plan_batch` (a batch's masks, statistics and table), each call of the
functions `--calls` names (`gblastn.engine:joined_volume_hits`, a method as
`gblastn.engine:Engine.extensions_ahead`), each job's turn at a batch's turnstile (the
diagonal hash's order: waited for, then held) and the process's resource use at its exit,
with the CPU seconds of each kind of thread (the scan's, the CPU pool's, the spread's).
`show` prints, per stage (and per kind of thread with --threads), how many threads were in
it in each time step: which stages overlap, and what waits on what; and, per turnstile, how
long its turns were held and how soon each began after the one before.
"""

import importlib.abc
import importlib.machinery
import os
import sys
import threading
import time
from pathlib import Path

STARTED = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TIMED_IMPORTS = ("numpy", "numba", "pycuda.driver", "lmdb", "typer", "gblastn.query",
                 "gblastn.engine", "gblastn.scan.gpu", "gblastn.wordrun",
                 "gblastn.drivers.pipeline", "gblastn.ungapped", "gblastn.dust", "gblastn.traceback", "gblastn.output.tabular")


def record(path: str, args: list, calls: tuple = ()) -> None:
    events = []

    def add_event(stage: str, start: float, end: float) -> None:
        events.append((threading.current_thread().name, stage, start - STARTED, end - STARTED))

    _time_imports(add_event)
    _time_stages(add_event)
    turns = _time_turns(add_event)
    cpu_by_kind = _time_threads_cpu()
    for call in ("gblastn.engine:plan_batch", *calls):
        _time_calls(call, add_event)
    real_exit = os._exit

    def leave(code):  # the command line leaves through os._exit once its output is complete
        import resource
        now = time.perf_counter()
        add_event("exit", now, now)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        with open(path, "w") as out:
            for event in list(events):
                out.write("%s\t%s\t%.4f\t%.4f\n" % event)
            for turn in list(turns):
                out.write("# turn %d %d %.5f %.5f %.5f\n" % turn)
            out.write(f"# minor faults {usage.ru_minflt}, voluntary switches {usage.ru_nvcsw}, "
                      f"user {usage.ru_utime:.2f} s, system {usage.ru_stime:.2f} s\n")
            out.write("# CPU seconds by kind of thread: " + ", ".join(
                f"{kind} {seconds:.2f}" for kind, seconds in cpu_by_kind().most_common()) + "\n")
        real_exit(code)

    os._exit = leave
    sys.argv = ["gblastn"] + args
    from gblastn.__main__ import main
    main()


def _time_threads_cpu():
    """A function giving the CPU seconds of each kind of thread (_thread_kind) so far: those
    of the threads that ended, added up as each ends, and those of the threads alive, read
    from their CPU clocks."""
    import collections

    ended, lock = collections.Counter(), threading.Lock()
    real_run = threading.Thread.run

    def run(self):
        try:
            real_run(self)
        finally:
            with lock:
                ended[_thread_kind(self.name)] += time.thread_time()

    threading.Thread.run = run

    def cpu_by_kind() -> collections.Counter:
        with lock:
            seconds = collections.Counter(ended)
        for thread in threading.enumerate():
            try:
                clock = time.pthread_getcpuclockid(thread.ident)
                seconds[_thread_kind(thread.name)] += time.clock_gettime(clock)
            except (OSError, TypeError):  # ended meanwhile
                continue
        return seconds

    return cpu_by_kind


def _time_stages(add_event) -> None:
    from gblastn.timing import StageTimes

    real_add = StageTimes.add

    def add(self, name, seconds, start=None):
        start = time.perf_counter() - seconds if start is None else start
        add_event(name, start, start + seconds)
        real_add(self, name, seconds, start)

    StageTimes.add = add


def _time_turns(add_event) -> list:
    """Each turn at a pipeline's turnstile as two events, "turn waited" and "turn held"; the
    list it returns gets (turnstile, job number, asked, began, left) for each (seconds from
    the process's start), the turnstiles numbered as they are first used."""
    import itertools
    from contextlib import contextmanager

    turns, numbers, numbering = [], itertools.count(), threading.Lock()

    def number_of(turnstile) -> int:
        # an attribute, not id(): a batch's turnstile is let go once its jobs are done,
        # and a later one may be given the same id
        with numbering:
            if not hasattr(turnstile, "timeline_number"):
                turnstile.timeline_number = next(numbers)
            return turnstile.timeline_number

    def wrap(module):
        real = module._Turnstile.turn

        @contextmanager
        def turn(self, number):
            asked = time.perf_counter()
            with real(self, number):
                began = time.perf_counter()
                add_event("turn waited", asked, began)
                try:
                    yield
                finally:
                    left = time.perf_counter()
                    add_event("turn held", began, left)
                    turns.append((number_of(self), number, asked - STARTED,
                                  began - STARTED, left - STARTED))
        module._Turnstile.turn = turn

    _after_import("gblastn.drivers.pipeline", wrap)
    return turns


def _time_calls(call: str, add_event) -> None:
    """Each call of `call` ("module:name" or "module:Class.method") as an event named after
    the function: the module's attribute is replaced once it is imported, so calls that look
    the name up when they run (a module's globals, a class's methods) are timed."""
    module_name, _, qualname = call.partition(":")
    *owner_path, name = qualname.split(".")

    def wrap(module):
        owner = module
        for part in owner_path:
            owner = getattr(owner, part)
        real = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                add_event(name, start, time.perf_counter())
        setattr(owner, name, timed)

    _after_import(module_name, wrap)


def _time_imports(add_event) -> None:
    for name in TIMED_IMPORTS:
        _after_import(name, lambda module, start, name=name:
                      add_event("import " + name, start, time.perf_counter()), with_start=True)


_HOOKS: dict = {}  # module name -> [(function, with_start)]


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs the hooks of a module in _HOOKS right after it first runs."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _HOOKS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real = spec.loader.exec_module

        def exec_module(module):
            start = time.perf_counter()
            real(module)
            for hook, with_start in _HOOKS[fullname]:
                if with_start:
                    hook(module, start)
                else:
                    hook(module)
        spec.loader.exec_module = exec_module
        return spec


def _after_import(name: str, function, with_start: bool = False) -> None:
    """function(module), or function(module, start), right after the module first runs."""
    if not _HOOKS:
        sys.meta_path.insert(0, _AfterImport())
    _HOOKS.setdefault(name, []).append((function, with_start))


LABEL = 40  # characters of a row's label (thread kind and stage)


def show(path: str, step: float, by_thread: bool) -> None:
    """The stages' rows; the GPU set-up thread's warm-up (a made-up search) shows as its
    own stages under the thread kind `device`."""
    events = []
    for line in open(path):
        if not line.startswith("#"):
            thread, stage, start, end = line.rstrip("\n").split("\t")
            events.append((_thread_kind(thread) if by_thread else "", stage, float(start),
                           float(end)))
    last = max(end for _, _, _, end in events)
    steps = int(last / step) + 1
    rows: dict = {}
    for kind, stage, start, end in events:
        cells = rows.setdefault((kind, stage), [0.0] * steps)
        for k in range(int(start / step), min(steps, int(end / step) + 1)):
            cells[k] += max(0.0, min(end, (k + 1) * step) - max(start, k * step)) / step
    first_start = {key: min(s for k, st, s, _ in events if (k, st) == key) for key in rows}
    print(" " * (LABEL + 1) + " ".join(f"{k * step:5.2f}" for k in range(steps)))
    for key in sorted(rows, key=first_start.get):
        label = f"{key[0]} {key[1]}".strip()[:LABEL]
        print(f"{label:{LABEL}} " + " ".join(f"{c:5.1f}" if c >= 0.05 else "    ."
                                              for c in rows[key]))
    turns = []
    for line in open(path):
        if line.startswith("# turn "):
            turnstile, number, *times = line.split()[2:]
            turns.append((int(turnstile), int(number), *map(float, times)))
        elif line.startswith("#"):
            print(line.rstrip())
    for line in turn_summary(turns):
        print(line)


def turn_summary(turns: list) -> list:
    """Per turnstile: its turns' span and time held, and the gaps between one turn's end and
    the next one's start, split by whether the next job was waiting by then (the handoff's
    own cost) or came later (the chain waited for it)."""
    lines = []
    by_turnstile: dict = {}
    for turnstile, number, asked, began, left in turns:
        by_turnstile.setdefault(turnstile, {})[number] = (asked, began, left)
    for turnstile, jobs in sorted(by_turnstile.items()):
        handoffs, late = [], []
        for number, (asked, began, left) in jobs.items():
            if number - 1 in jobs:
                before = jobs[number - 1][2]
                (handoffs if asked <= before else late).append(began - before)
        held = sum(left - began for _, began, left in jobs.values())
        first = min(began for _, began, _ in jobs.values())
        last = max(left for _, _, left in jobs.values())
        handoffs.sort()
        median = f"{1e3 * handoffs[len(handoffs) // 2]:.2f} ms" if handoffs else "-"
        lines.append(f"# turnstile {turnstile}: {len(jobs)} turns from {first:.2f} to "
                     f"{last:.2f} s, held {held:.2f} s; {len(handoffs)} to a job waiting "
                     f"(median {median}, {sum(handoffs):.3f} s in all), {len(late)} to a job "
                     f"that came later ({sum(late):.3f} s)")
    return lines


def _thread_kind(name: str) -> str:
    """A thread's name without its number (gblastn-cpu3 -> cpu)."""
    return name.removeprefix("gblastn-").rstrip("0123456789_")


def main() -> None:
    if len(sys.argv) >= 6 and sys.argv[1] == "record" and sys.argv[3] == "--calls" \
            and sys.argv[5] == "--":
        record(sys.argv[2], sys.argv[6:], tuple(sys.argv[4].split(",")))
    elif len(sys.argv) >= 4 and sys.argv[1] == "record" and sys.argv[3] == "--":
        record(sys.argv[2], sys.argv[4:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "show":
        import argparse
        parser = argparse.ArgumentParser(prog="timeline.py show")
        parser.add_argument("path")
        parser.add_argument("--step", type=float, default=0.05)
        parser.add_argument("--threads", action="store_true")
        a = parser.parse_args(sys.argv[2:])
        try:
            show(a.path, a.step, a.threads)
        except BrokenPipeError:  # | head
            os._exit(0)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
