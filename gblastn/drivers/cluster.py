"""The cluster driver: one search on the workers of a Dask cluster, whose results are the
single-process search's, byte for byte.

Two modes:

* shard: each worker searches its shard of the database (shards.py) for every query batch,
  with the whole database's statistics and ordinals, and returns each query's preliminary hit
  list with BLAST's ranking keys (engine.prelim_hit_lists); this process merges them to the
  database's lists (engine.merged_hit_lists), sends each shard the subjects of its own that
  survived, whose traceback runs where their preliminary HSPs are, and makes each query's
  result from the traced subjects (engine.query_result: BLAST's final order,
  max_target_seqs; max_hsps is cut in the traceback).
* replicate: each worker holds the whole database and searches whole batches (the serial
  driver's search_batch); the batches are BLAST's, so the results are the same.

Workers keep what they opened between searches (ResidentDatabases, a worker plugin): the
database, its volumes' subject buffers and, on a GPU worker, the backend with its CUDA
context and the volumes copied to the device. Tasks of a shard go to the same worker each
time; a worker lost mid-search has its tasks rerun elsewhere by the scheduler (a traceback
task that finds no preliminary search of its batch there redoes it), and a search that
cannot finish fails with one line, leaving no output (run.py's OutputFiles).
"""

import contextlib
import os
import sys
import uuid
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..errors import ClusterError, GblastnError, MissingPackageError, OptionsError
from ..options import LOCAL_ONLY_OPTIONS

MODES = ("auto", "shard", "replicate")
BATCHES_AHEAD = 2            # query batches in flight beyond the one being merged, per worker
WORKERS_WAIT_SECONDS = 60    # how long a search waits for a cluster's first worker
CONNECT_SECONDS = 30


@dataclass
class ClusterSpec:
    """Where a search runs and how it is split: an existing scheduler (`scheduler` address
    or `scheduler_file`), or a local cluster of `local_workers` workers for one search (one
    per GPU where there are GPUs, else CPU processes); `shards` forces the database's split
    into that many shards (0: one per worker), `mode` shard, replicate or auto."""

    scheduler: str | None = None
    scheduler_file: str | None = None
    local_workers: int = 0
    shards: int = 0
    mode: str = "auto"
    device: str = "auto"
    gpu_id: int = 0
    query_letters: int | None = None  # the queries' size when known: auto mode's hint
    # the shard of each ordinal, any assignment (shards.shards_of), instead of `shards` runs
    assignment: object = None

    def check(self) -> None:
        given = [self.scheduler is not None, self.scheduler_file is not None,
                 self.local_workers > 0]
        if sum(given) > 1:
            raise OptionsError("give one of -scheduler, -scheduler_file and -local_workers")
        if self.local_workers < 0 or self.shards < 0:
            raise OptionsError("-local_workers and -shards must not be negative")
        if self.mode not in MODES:
            raise OptionsError(f"invalid -cluster_mode {self.mode!r}: use shard, replicate or "
                               "auto")
        if not requested(self) and (self.shards or self.mode != "auto" or
                                    self.assignment is not None):
            raise OptionsError("-shards and -cluster_mode need -scheduler, -scheduler_file or "
                               "-local_workers")
        if self.mode == "replicate" and (self.shards > 1 or self.assignment is not None):
            raise OptionsError("-shards splits the database: not with -cluster_mode replicate")


def requested(spec: ClusterSpec | None) -> bool:
    return spec is not None and (spec.scheduler is not None or spec.scheduler_file is not None
                                 or spec.local_workers > 0)


def _distributed():
    # the command line keeps numba from importing yaml (numba_start.skip_numba_extras);
    # Dask's configuration is read with it
    if "yaml" in sys.modules and sys.modules["yaml"] is None:
        del sys.modules["yaml"]
    try:
        import distributed
    except ImportError:
        raise MissingPackageError("searching on a cluster needs Dask: pip install "
                                  "'gblastn[dask]'") from None
    return distributed


# ----------------------------------------------------------------------------------------------
# the cluster


def gpu_count() -> int:
    """GPUs this host shows (CUDA_VISIBLE_DEVICES counts), 0 without dask-cuda or a driver."""
    try:
        from dask_cuda.utils import get_n_gpus
        return int(get_n_gpus())
    except Exception:  # noqa: BLE001 - no dask-cuda, no NVML, no driver: no GPU to use
        return 0


def local_cluster(workers: int, device: str, threads: int = 1):
    """A cluster on this host: one worker per GPU (dask-cuda's LocalCUDACluster, each worker
    seeing its own GPU as device 0) where there are GPUs and the device allows, else
    `workers` CPU worker processes. Each worker runs one gblastn task at a time, on
    `threads` threads of its own."""
    distributed = _distributed()
    gpus = 0 if device == "cpu" else gpu_count()
    if device == "gpu" and gpus == 0:
        from ..errors import GpuUnavailableError
        raise GpuUnavailableError("-device gpu: no GPU found for the cluster's workers "
                                  "(dask-cuda and an NVIDIA driver are needed)")
    import logging

    common = dict(threads_per_worker=1, dashboard_address=":0", silence_logs=logging.ERROR,
                  env={"OMP_NUM_THREADS": str(threads)})
    if gpus:
        from dask_cuda import LocalCUDACluster
        return LocalCUDACluster(n_workers=min(workers, gpus) if workers else gpus, **common)
    return distributed.LocalCluster(n_workers=max(1, workers), processes=True, **common)


@contextlib.contextmanager
def connected(spec: ClusterSpec, threads: int = 1):
    """A Client of the spec's cluster (a local one made here and closed after), with the
    workers' ResidentDatabases plugin registered and at least one worker."""
    distributed = _distributed()
    cluster = None
    try:
        if spec.local_workers:
            cluster = local_cluster(spec.local_workers, spec.device, threads)
            client = distributed.Client(cluster, set_as_default=False)
        elif spec.scheduler_file is not None:
            if not os.path.isfile(spec.scheduler_file):
                raise ClusterError(f"-scheduler_file {spec.scheduler_file}: no such file "
                                   "(gblastn serve writes it)")
            client = distributed.Client(scheduler_file=spec.scheduler_file,
                                        timeout=CONNECT_SECONDS, set_as_default=False)
        else:
            client = distributed.Client(spec.scheduler, timeout=CONNECT_SECONDS,
                                        set_as_default=False)
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        where = spec.scheduler or spec.scheduler_file or "the local cluster"
        raise ClusterError(f"cannot reach the scheduler of {where}: {exc}") from None
    try:
        from .resident import PLUGIN_NAME, ResidentDatabases

        client.register_plugin(ResidentDatabases(spec.device, spec.gpu_id), name=PLUGIN_NAME)
        try:
            client.wait_for_workers(1, timeout=WORKERS_WAIT_SECONDS)
        except TimeoutError:
            raise ClusterError("the cluster has no worker") from None
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def worker_addresses(client) -> list:
    return sorted(client.scheduler_info(n_workers=-1)["workers"])


# ----------------------------------------------------------------------------------------------
# the search, from this process


@dataclass
class ClusterSearch:
    """One search on a cluster: `db` opened here too (the statistics, the shards and the
    output's ids and titles come from it), `db_name` as the workers open it."""

    client: object
    spec: ClusterSpec
    db: object
    db_name: str
    options: object
    search_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self):
        from ..engine import query_batch_letters
        from ..shards import DatabaseStatistics

        restricting = [name for name in LOCAL_ONLY_OPTIONS
                       if getattr(self.options, name) is not None]
        if restricting:
            # the workers search their shards of the whole database, unrestricted and unmasked
            raise OptionsError(f"-{restricting[0]} is not supported by gblastn's cluster "
                               "searches: search in one process")
        self.statistics = DatabaseStatistics.of(self.db)
        self.workers = worker_addresses(self.client)
        self.mode = choose_mode(self.spec, self.db, self.workers, self._device_memory(),
                                query_batch_letters(self.options))
        self.shards = self._shards() if self.mode == "shard" else []

    def _device_memory(self) -> int | None:
        if self.spec.mode != "auto" or self.spec.shards or len(self.workers) < 2:
            return None
        from .resident import worker_device_memory

        found = self.client.run(worker_device_memory)
        sizes = [size for size in found.values() if size is not None]
        return min(sizes) if sizes else None

    def _shards(self) -> list:
        from ..shards import contiguous_shards, shards_of

        if self.spec.assignment is not None:
            if len(self.spec.assignment) != self.db.num_seqs:
                raise OptionsError(f"the shard assignment names {len(self.spec.assignment)} "
                                   f"sequences; the database has {self.db.num_seqs}")
            return shards_of(self.spec.assignment)
        return contiguous_shards(self.db, self.spec.shards or len(self.workers))

    def results(self, queries):
        """Each query with its QueryResult, in input order."""
        for pairs in self.batch_results(queries):
            yield from pairs

    def batch_results(self, queries):
        """Each batch's [(query, QueryResult)], in input order."""
        from ..engine import query_batches

        from .resident import forget_search

        batches = enumerate(query_batches(queries, self.options))
        try:
            yield from self._results(batches)
        except GblastnError:
            raise
        except Exception as exc:  # noqa: BLE001 - the cluster's failures, as one line
            raise ClusterError(_failure(exc)) from None
        finally:
            with contextlib.suppress(Exception):
                self.client.run(forget_search, self.search_id)

    def _results(self, batches):
        from .resident import BatchRequest

        ahead = BATCHES_AHEAD * len(self.workers)
        in_flight = deque()
        index = 0
        for number, batch in batches:
            request = BatchRequest(self.search_id, number, self.db_name, self.statistics,
                                   self.options, batch, index)
            index += len(batch)
            in_flight.append((request, self._submit(request)))
            while len(in_flight) > ahead:
                yield self._finish(*in_flight.popleft())
        while in_flight:
            yield self._finish(*in_flight.popleft())

    def _task_key(self, what: str, request, shard=None) -> str:
        part = "" if shard is None else f"-{shard.index}"
        return f"gblastn-{what}-{self.search_id}-{request.number}{part}"

    def _submit(self, request) -> list:
        from .resident import replicate_batch, shard_prelim

        if self.mode == "replicate":
            return [self.client.submit(replicate_batch, request, pure=False,
                                       key=self._task_key("batch", request))]
        return [self.client.submit(shard_prelim, request, shard, pure=False,
                                   key=self._task_key("prelim", request, shard),
                                   **self._placement(shard)) for shard in self.shards]

    def _placement(self, shard) -> dict:
        """A shard's tasks go to the same worker every time, where its volumes are resident;
        to another when that one is lost."""
        return {"workers": [self.workers[shard.index % len(self.workers)]],
                "allow_other_workers": True}

    def _finish(self, request, futures: list):
        from ..engine import merged_hit_lists, query_result
        from .resident import shard_traceback

        if self.mode == "replicate":
            return list(zip(request.queries, futures[0].result()))
        lists = self.client.gather(futures)
        merged = merged_hit_lists(lists, self.options)
        tracing = [self.client.submit(shard_traceback, request, shard,
                                      _survivors_of(shard, merged), pure=False,
                                      key=self._task_key("traceback", request, shard),
                                      **self._placement(shard))
                   for shard in self.shards]
        traced = [[] for _ in request.queries]
        for found in self.client.gather(tracing):
            for q, ordinal, hsps in found:
                traced[q].append((ordinal, hsps))
        return [(query, query_result(request.first_index + q, query, traced[q], self.options))
                for q, query in enumerate(request.queries)]


def worker_db_name(name) -> str:
    """The database's name as the workers open it: each name of `name` made absolute where
    it names files from this folder (workers run in other folders), else as given (found
    in $BLASTDB)."""
    import glob

    if not isinstance(name, str):
        raise OptionsError("a cluster searches databases (-db), not -subject files")
    names = []
    for part in name.split():
        absolute = os.path.abspath(part)
        names.append(absolute if glob.glob(glob.escape(absolute) + "*") else part)
    return " ".join(names)


def _survivors_of(shard, merged: dict) -> dict:
    """The merged lists' subjects ({query: ordinals}) that `shard` holds."""
    picked = {}
    for q, ordinals in merged.items():
        mine = ordinals[np.isin(ordinals, shard.ordinals, assume_unique=True)]
        if mine.size:
            picked[q] = mine
    return picked


def choose_mode(spec: ClusterSpec, db, workers: list, device_memory: int | None,
                batch_letters: int) -> str:
    """shard or replicate. Forced by -cluster_mode, or shard with -shards; else shard when
    the database does not fit one worker's device, or when the queries (of spec's
    query_letters, batches of `batch_letters`) make fewer batches than twice the workers:
    only the database's split then keeps every worker busy (the batches are BLAST's, which
    a further split would change); else replicate."""
    if spec.mode != "auto":
        return spec.mode
    if spec.shards > 1 or spec.assignment is not None:
        return "shard"
    if len(workers) < 2:
        return "replicate"
    if device_memory is not None and int(db.total_letters) // 4 > device_memory:
        return "shard"
    letters = spec.query_letters
    if letters is None or -(-letters // batch_letters) < 2 * len(workers):
        return "shard"
    return "replicate"


def _failure(exc: BaseException) -> str:
    """One line for a search the cluster could not finish."""
    kind = type(exc).__name__
    if kind == "KilledWorker":
        return ("the cluster search failed: its workers died on the same task again and "
                f"again ({exc})")
    if kind in ("CancelledError", "FutureCancelledError"):
        return "the cluster search was cancelled: the scheduler or its workers went away"
    return f"the cluster search failed: {kind}: {exc}"
