"""CPU threads for the independent pieces of a stage: the subject chunks of the gapped stage,
the subjects of a query's traceback; and the pipeline's pool of them, most urgent first.

The pieces' compiled kernels release the GIL, so they run in parallel. Only leaf tasks run on
a pool (a task never waits on another task), so the drivers' stage threads can all share one
pool without deadlock. Results come back in the order of the pieces, which keeps the output
independent of the thread count.
"""

import heapq
import itertools
import threading
from concurrent.futures import Future, ThreadPoolExecutor


class TaskPool:
    """`threads` worker threads, or none (the caller runs every piece) when threads <= 1."""

    def __init__(self, threads: int):
        self.threads = max(1, int(threads))
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="gblastn-task") \
            if self.threads > 1 else None

    def map(self, function, items) -> list:
        """[function(item) for item in items], the items spread over the pool's threads."""
        items = list(items)
        if self._executor is None or len(items) <= 1:
            return [function(item) for item in items]
        return list(self._executor.map(function, items))

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "TaskPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


INLINE = TaskPool(1)  # runs every piece in the calling thread


class PriorityPool:
    """`threads` worker threads that always take the most urgent task waiting (the lowest
    priority value; equal ones first come, first served). The pipeline's CPU work (gapped
    pieces, traceback tasks) shares one such pool: two pools of as many threads as cores
    each would give the gapped pieces, which the next tracebacks wait for, half the cores.
    A task never waits on another task of its pool."""

    def __init__(self, threads: int, name: str = "gblastn-cpu"):
        self.threads = max(1, int(threads))
        self._waiting: list = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._closed = False
        self._workers = [threading.Thread(target=self._work, name=f"{name}{i}", daemon=True)
                         for i in range(self.threads)]
        for worker in self._workers:
            worker.start()

    def submit(self, priority: tuple, function, *args) -> Future:
        """function(*args) as a Future; priority: a tuple, the lowest runs first."""
        future = Future()
        with self._changed:
            if self._closed:
                future.cancel()
                return future
            heapq.heappush(self._waiting, (priority, next(self._order), future, function, args))
            self._changed.notify()
        return future

    def map(self, function, items, priority=(0,)) -> list:
        """[function(item) for item in items] on the pool's threads (called from outside it)."""
        futures = [self.submit(priority, function, item) for item in items]
        return [future.result() for future in futures]

    def close(self) -> None:
        """Cancel the waiting tasks; the workers leave after their current one."""
        with self._changed:
            self._closed = True
            waiting, self._waiting = self._waiting, []
            self._changed.notify_all()
        for *_, future, _, _ in waiting:
            future.cancel()

    def _work(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closed:
                    self._changed.wait()
                if not self._waiting:
                    return
                _, _, future, function, args = heapq.heappop(self._waiting)
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(*args))
            except BaseException as exc:  # noqa: BLE001 - the submitter's to handle
                future.set_exception(exc)
