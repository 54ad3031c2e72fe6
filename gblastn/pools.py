"""CPU threads for the independent pieces of a stage: the subject chunks of the gapped stage,
the subjects of a query's traceback; the pipeline's pool of them, most urgent first; and
what the drivers hand the engine so that it takes no lock of its own (a call beside the
caller's, each thread's own buffer).

The pieces' compiled kernels release the GIL, so they run in parallel. A task never waits on
a task still queued (only `spread` waits, and only for calls already running), so the
drivers' stage threads can all share one pool without deadlock. Results come back in the
order of the pieces, which keeps the output independent of the thread count.
"""

import gc
import heapq
import itertools
import os
import queue
import threading
from contextlib import contextmanager
from concurrent.futures import Future


def available_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class _Spread:
    """function(k) for k in range(count), each index taken by whichever thread comes next:
    the caller and any helper tasks. A helper that comes when every index is taken returns
    at once, so the caller never waits for a task still queued, only for calls running.
    Indices are taken with next() on a counter and completions reported on a SimpleQueue,
    both single C calls: no lock for a preempted thread to hold."""

    def __init__(self, function, count: int):
        self.function, self.count = function, count
        self.indices = itertools.count()
        self.finished = queue.SimpleQueue()  # one item per call returned: its error or None

    def work(self) -> None:
        while (k := next(self.indices)) < self.count:
            try:
                self.function(k)
                self.finished.put(None)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                self.finished.put(exc)

    def run(self, submit_helper, helpers: int) -> None:
        for _ in range(min(helpers, self.count - 1)):
            submit_helper(self.work)
        self.work()
        errors = [self.finished.get() for _ in range(self.count)]
        error = next((e for e in errors if e is not None), None)
        if error is not None:
            raise error


class TaskPool:
    """`threads` worker threads (a PriorityPool), or none (the caller runs every piece) when
    threads <= 1. Pieces run first come, first served unless given weights; a spread's
    helpers go before them all, so a heavy piece that spreads its work gets the next free
    threads instead of waiting behind every piece queued."""

    def __init__(self, threads: int):
        self.threads = max(1, int(threads))
        self._pool = PriorityPool(self.threads, "gblastn-task") if self.threads > 1 else None

    def map(self, function, items) -> list:
        """[function(item) for item in items], the items spread over the pool's threads."""
        items = list(items)
        if self._pool is None or len(items) <= 1:
            return [function(item) for item in items]
        return self._pool.map(function, items)

    def map_later(self, function, items, weights=None):
        """map, started now: returns a function that waits for the results and gives their
        list. With `weights`, the heaviest items start first. Without threads the items run
        now, in the calling thread."""
        items = list(items)
        if self._pool is None:
            results = [function(item) for item in items]
            return lambda: results
        return self._pool.map_later(function, items, weights)

    def spread(self, function, count: int) -> None:
        """function(k) for k in range(count) by the calling thread and the pool's threads
        that are free; returns when every call has. A piece running on the pool may spread
        its own work: it only ever waits for calls already running."""
        if self._pool is None:
            _Spread(function, count).run(None, 0)
        else:
            self._pool.spread(function, count)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    def __enter__(self) -> "TaskPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


INLINE = TaskPool(1)  # runs every piece in the calling thread


def beside(function, *args) -> Future:
    """function(*args) in a thread of its own, beside the caller's work: its Future."""
    future = Future()

    def run():
        try:
            future.set_result(function(*args))
        except BaseException as exc:  # noqa: BLE001 - re-raised by future.result()
            future.set_exception(exc)

    threading.Thread(target=run, name="gblastn-beside", daemon=True).start()
    return future


def in_turn(function, count: int) -> None:
    """function(k) for k in range(count), one after the other in the calling thread: a
    spread without threads."""
    for k in range(count):
        function(k)


def on_threads(threads: int):
    """A spread (function(k) for k in range(count), returning when every call has) by the
    calling thread and up to `threads` - 1 more: the scan's and the ungapped stage's pieces,
    which the search waits for and which must not queue behind the pool's gapped and
    traceback work. The helpers are threads kept for the process (one set per thread count):
    threads started for each call each waited for the GIL to start, one after the other,
    and a job's turn at the diagonal hash had its 16 parts begin over 60 ms when the pieces
    took 15 ms (docs/perf/whole-search.md)."""
    if threads <= 1:
        return in_turn
    return _spread_pool(int(threads)).spread


_SPREAD_POOLS: dict = {}  # (process id, threads) -> PriorityPool (its spread: threads - 1 helpers)
_SPREAD_POOLS_LOCK = threading.Lock()


def _spread_pool(threads: int) -> "PriorityPool":
    key = (os.getpid(), threads)  # a forked process has none of its parent's threads
    with _SPREAD_POOLS_LOCK:
        pool = _SPREAD_POOLS.get(key)
        if pool is None:
            pool = _SPREAD_POOLS[key] = PriorityPool(threads, "gblastn-spread")
        return pool


class PerThreadBuffer:
    """Each thread's own buffer, at least `length` long when asked, made by make(length) and
    reused by the thread's later calls."""

    def __init__(self, make):
        self.make = make
        self._local = threading.local()

    def __call__(self, length: int):
        buffer = getattr(self._local, "buffer", None)
        if buffer is None or buffer.size < length:
            buffer = self._local.buffer = self.make(length)
        return buffer


def spread_map(pool, function, items) -> list:
    """[function(item) for item in items] by the calling thread and the free threads of
    `pool` (a TaskPool or a PriorityPool: its spread). The search's threads are already
    running: threads started for a stage would each wait for the GIL to start, while the
    warm-up holds it."""
    items = list(items)
    results = [None] * len(items)

    def one(k: int) -> None:
        results[k] = function(items[k])

    pool.spread(one, len(items))
    return results


def runs_of(items: list, weights: list, share) -> list:
    """`items` cut, in order, into runs whose weights add up to at least `share` each (the
    last run may weigh less)."""
    made, run, filled = [], [], 0
    for item, weight in zip(items, weights):
        run.append(item)
        filled += weight
        if filled >= share:
            made.append(run)
            run, filled = [], 0
    if run:
        made.append(run)
    return made


SPREAD_PRIORITY = (-1,)  # a spread piece's helpers: work that a running piece waits for


class PriorityPool:
    """`threads` worker threads that always take the most urgent task waiting (the lowest
    priority value; equal ones first come, first served). The pipeline's CPU work (gapped
    pieces, traceback tasks) shares one such pool: two pools of as many threads as cores
    each would give the gapped pieces, which the next tracebacks wait for, half the cores.
    A task never waits on a task of its pool still queued.

    No Python-level lock: the heap is changed by single heapq calls (atomic under the GIL)
    and a queue.SimpleQueue, whose put and get are C, hands each worker one token per task.
    A Condition here makes a convoy: a thread preempted while holding its lock keeps the
    workers and the submitting threads waiting (docs/perf/pipeline.md)."""

    def __init__(self, threads: int, name: str = "gblastn-cpu"):
        self.threads = max(1, int(threads))
        self._waiting: list = []
        self._order = itertools.count()
        self._tokens = queue.SimpleQueue()  # one per task pushed, one per worker on close
        self._closed = False
        self._workers = [threading.Thread(target=self._work, name=f"{name}{i}", daemon=True)
                         for i in range(self.threads)]
        for worker in self._workers:
            worker.start()

    def submit(self, priority: tuple, function, *args) -> Future:
        """function(*args) as a Future; priority: a tuple, the lowest runs first."""
        future = Future()
        if self._closed:
            future.cancel()
            return future
        heapq.heappush(self._waiting, (priority, next(self._order), future, function, args))
        self._tokens.put(None)
        if self._closed:  # closed meanwhile: close() may have drained the heap before the push
            self._cancel_waiting()
        return future

    def map(self, function, items, priority=(0,)) -> list:
        """[function(item) for item in items] on the pool's threads (called from outside it)."""
        futures = [self.submit(priority, function, item) for item in items]
        return [future.result() for future in futures]

    def map_later(self, function, items, weights=None):
        """As TaskPool.map_later: the items as tasks of priority (0, -weight)."""
        items = list(items)
        weights = [0] * len(items) if weights is None else list(weights)
        futures = [self.submit((0, -weight), function, item)
                   for item, weight in zip(items, weights)]
        return lambda: [future.result() for future in futures]

    def spread(self, function, count: int) -> None:
        """As TaskPool.spread; the helpers go before every task waiting."""
        _Spread(function, count).run(lambda work: self.submit(SPREAD_PRIORITY, work),
                                     self.threads - 1)

    def close(self) -> None:
        """Cancel the waiting tasks; the workers leave after their current one."""
        self._closed = True
        self._cancel_waiting()
        for _ in self._workers:
            self._tokens.put(None)

    def _cancel_waiting(self) -> None:
        while True:
            try:
                _, _, future, _, _ = heapq.heappop(self._waiting)
            except IndexError:
                return
            future.cancel()

    def _work(self) -> None:
        while True:
            self._tokens.get()
            if self._closed:
                return
            try:
                _, _, future, function, args = heapq.heappop(self._waiting)
            except IndexError:  # taken by close()
                continue
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(*args))
            except BaseException as exc:  # noqa: BLE001 - the submitter's to handle
                future.set_exception(exc)


# The cyclic garbage collector's thresholds while a search runs. A search makes objects by
# the million (a batch of short reads: several per (query, subject) pair), and at Python's
# (700, 10, 10) the collector ran 1,700 times in a search of 20,000 reads, a quarter of its
# wall time, the GIL held, mostly in full collections over every object the search still
# held; at these it ran 17 times, 0.2 s (docs/perf/traceback.md).
SEARCH_GC_THRESHOLDS = (50_000, 20, 100)
_COLLECTIONS_LOCK = threading.Lock()
_searches_running = 0
_thresholds_before = gc.get_threshold()


def collect_rarely() -> None:
    """Raise this process's collector thresholds to SEARCH_GC_THRESHOLDS (none lowered):
    for a process that runs searches only, such as a cluster's worker."""
    gc.set_threshold(*(max(ours, theirs) for ours, theirs in
                       zip(SEARCH_GC_THRESHOLDS, gc.get_threshold())))


@contextmanager
def rare_collections():
    """collect_rarely while any search of this process runs; the thresholds as they were once
    the last one ends."""
    global _searches_running, _thresholds_before
    with _COLLECTIONS_LOCK:
        if _searches_running == 0:
            _thresholds_before = gc.get_threshold()
            collect_rarely()
        _searches_running += 1
    try:
        yield
    finally:
        with _COLLECTIONS_LOCK:
            _searches_running -= 1
            if _searches_running == 0:
                gc.set_threshold(*_thresholds_before)
