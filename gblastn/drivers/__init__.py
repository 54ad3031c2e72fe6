"""The search drivers: they decide where and when the engine's calls (engine.py) run, and own
every thread, lock and turn of a search.

* run.py: the command line's search: query files in, outputs written whole, through
  serial.py (batch after batch in the calling thread, its stages on a pool) or
  pipeline.py (the stages of successive batches overlapped in threads joined by queues);
* api.py: the Python API's search, serial on a pool of num_threads threads.

Each holds one Search: the backend (or the Future of its set-up) becomes the search's
Engine once, when the first batch needs it.
"""

import sys
import threading
from dataclasses import dataclass, field

_NOTICE_LOCK = threading.Lock()


@dataclass
class Search:
    """What a driver holds for one search: the database (as -seqidlist restricts it and
    -db_soft_mask masks it), the options, its StageTimes, and
    its scan backend, a Backend or the Future of the GPU's set-up, waited for when the first
    batch's queries are read, masked and indexed (engine())."""

    db: object
    options: object
    times: object          # StageTimes
    backend: object        # Backend, or a Future of one
    buffers: object = None  # engine.SubjectBuffers, shared by the engine and the preloading
    _engine: object = field(default=None, repr=False)
    _noticed: bool = field(default=False, repr=False)

    def __post_init__(self):
        from ..db.blast_masks import mask_database
        from ..db.subset import restrict
        from ..engine import SubjectBuffers
        from ..heap import return_large_blocks

        return_large_blocks()
        self.db = mask_database(restrict(self.db, self.options), self.options)

        if self.buffers is None:
            self.buffers = SubjectBuffers(self.times)

    def plan(self, queries: list, first_index: int, pool, masks_found: list | None = None):
        """A batch's masks (but those found ahead, as engine.plan_batch takes them),
        statistics and table: no backend needed."""
        from ..engine import plan_batch

        return plan_batch(queries, first_index, self.db, self.options, self.times, pool,
                          masks_found)

    def batch_sizes(self):
        """The sizes of blastn's query batches for this search (engine.QueryBatchSizes),
        which follow the database's letters."""
        from ..engine import QueryBatchSizes

        return QueryBatchSizes(self.options.task, int(self.db.total_letters))

    def ready_backend(self):
        """The scan backend, waiting for its set-up (which may raise GpuUnavailableError).
        The first call says on stderr what a backend has to say (the CPU's in place of a
        GPU that -device auto did not find)."""
        from concurrent.futures import Future

        backend = self.backend.result() if isinstance(self.backend, Future) else self.backend
        notice = getattr(backend, "notice", None)
        with _NOTICE_LOCK:
            if notice and not self._noticed:
                self._noticed = True
                print(notice, file=sys.stderr, flush=True)
        return backend

    def engine(self):
        """The search's Engine, its backend resolved into a BackendPlan at the first call."""
        if self._engine is None:
            from ..db.reader import sparse_letters
            from ..engine import Engine
            from ..pools import PerThreadBuffer
            from ..scan.backend import BackendPlan

            self._engine = Engine(self.db, self.options,
                                  BackendPlan.resolve(self._scan_backend(), self.options),
                                  self.times, self.buffers, PerThreadBuffer(sparse_letters))
        return self._engine

    def _scan_backend(self):
        """The backend the engine scans with: the CPU's for a soft-masked database, whose
        scan ranges only the CPU's scan reads."""
        from ..scan.backend import CPU

        backend = self.ready_backend()
        return CPU if getattr(self.db, "mask_algorithm", None) is not None else backend

    def retire_device(self) -> None:
        """Give the device back for good (GpuBackend.retire): the process ends with the
        search. Nothing for a backend without one."""
        backend = self.ready_backend()
        if backend.capabilities.retires:
            backend.retire(for_good=True)
