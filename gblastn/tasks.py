"""CPU threads for the independent pieces of a stage: the subject chunks of the gapped stage,
the subjects of a query's traceback.

The pieces' compiled kernels release the GIL, so they run in parallel. Only leaf tasks run on
a pool (a task never waits on another task), so the drivers' stage threads can all share one
pool without deadlock. Results come back in the order of the pieces, which keeps the output
independent of the thread count.
"""

from concurrent.futures import ThreadPoolExecutor


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
