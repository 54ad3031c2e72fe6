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
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..errors import ClusterError, GblastnError, MissingPackageError, OptionsError

try:  # the tasks run where Dask is; this module is imported only by searches that use it
    from distributed import WorkerPlugin as _WorkerPlugin
except ImportError:
    _WorkerPlugin = object

PLUGIN_NAME = "gblastn-resident"
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
        if self.mode == "replicate" and self.shards > 1:
            raise OptionsError("-shards splits the database: not with -cluster_mode replicate")


def requested(spec: ClusterSpec | None) -> bool:
    return spec is not None and (spec.scheduler is not None or spec.scheduler_file is not None
                                 or spec.local_workers > 0)


def _distributed():
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
    import logging

    distributed = _distributed()
    gpus = 0 if device == "cpu" else gpu_count()
    if device == "gpu" and gpus == 0:
        from ..errors import GpuUnavailableError
        raise GpuUnavailableError("-device gpu: no GPU found for the cluster's workers "
                                  "(dask-cuda and an NVIDIA driver are needed)")
    common = dict(threads_per_worker=1, dashboard_address=None, silence_logs=logging.ERROR,
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
# what workers keep between searches


class ResidentDatabases(_WorkerPlugin):
    """A Dask worker plugin: on each worker, the databases it opened
    (ResidentDatabase, by name), the scan backend (a GPU's CUDA context and resident volumes
    are made once per worker process) and thread pools, kept across searches. `preload`
    names a database to open, and to copy to the device, when the worker starts."""

    idempotent = True  # a search joining a served cluster keeps what the workers hold

    def __init__(self, device: str = "auto", gpu_id: int = 0, preload: str | None = None,
                 shard=None):
        self.device, self.gpu_id, self.preload, self.shard = device, gpu_id, preload, shard

    def setup(self, worker=None) -> None:
        self.lock = threading.Lock()
        self.databases: dict = {}
        self.pools: dict = {}
        self._backend = None
        if self.preload is not None:
            self.database(self.preload).load(self.shard)

    def teardown(self, worker=None) -> None:
        for resident in self.databases.values():
            resident.db.close()
        for pool in self.pools.values():
            pool.close()

    def backend(self):
        """The worker's scan backend, selected once. A GPU worker sees its own GPU (dask-cuda
        sets CUDA_VISIBLE_DEVICES for each), as -gpu_id picks among those it sees."""
        with self.lock:
            if self._backend is None:
                from ..scan import select_backend
                self._backend = select_backend(self.device, self.gpu_id)
            return self._backend

    def database(self, name: str, statistics=None) -> "ResidentDatabase":
        with self.lock:
            resident = self.databases.get(name)
            if resident is None:
                from ..db.reader import open_db
                resident = self.databases[name] = ResidentDatabase(open_db(name), self)
        if statistics is not None:
            statistics.check(resident.db, name)
        return resident

    def pool(self, threads: int):
        from ..pools import TaskPool

        with self.lock:
            return self.pools.setdefault(threads, TaskPool(threads))


class ResidentDatabase:
    """One opened database on a worker: its subject buffers (SubjectBuffers, kept across
    searches, as the GPU keeps their device copies), its diagonal-hash resets and shards'
    windows, and the preliminary searches waiting for their traceback."""

    def __init__(self, db, plugin: ResidentDatabases):
        from ..engine import SubjectBuffers
        from ..timing import StageTimes

        self.db, self.plugin = db, plugin
        self.buffers = SubjectBuffers(StageTimes())
        self.lock = threading.Lock()
        self.windows: dict = {}   # (shard key, replay) -> [ShardWindow]
        self.kept: dict = {}      # shard key -> bool per ordinal
        self.pending: dict = {}   # (search, batch, shard) -> (plan, PrelimHits)
        self._resets = None

    def load(self, shard=None) -> None:
        """Make the subject buffers of the shard's volumes (all without one) and copy them to
        the device, as far as they fit there."""
        backend = self.plugin.backend()
        ordinals = None if shard is None else shard.ordinals
        for volume in self.db.volumes:
            end = volume.first_ordinal + volume.num_seqs
            if ordinals is not None and not np.any((ordinals >= volume.first_ordinal) &
                                                   (ordinals < end)):
                continue
            subjects = self.buffers.of(volume)
            if backend.capabilities.preloads and not backend.preload(subjects):
                return

    def search(self, options, times):
        """A drivers.Search of this database for one search's options."""
        from . import Search

        return Search(self.db, options, times, self.plugin.backend(), self.buffers)

    def shard_windows(self, shard, replay: bool) -> list:
        from ..shards import hash_resets, shard_windows

        key = (shard.key, replay)
        with self.lock:
            if key not in self.windows:
                if replay and self._resets is None:
                    self._resets = hash_resets(self.db)
                self.windows[key] = shard_windows(self.db, shard.ordinals, replay, self._resets)
            return self.windows[key]

    def kept_ordinals(self, shard) -> np.ndarray:
        with self.lock:
            if shard.key not in self.kept:
                kept = np.zeros(self.db.num_seqs, dtype=bool)
                kept[shard.ordinals] = True
                self.kept[shard.key] = kept
            return self.kept[shard.key]


# ----------------------------------------------------------------------------------------------
# the workers' tasks


@dataclass
class BatchRequest:
    """One query batch of a search, as its tasks get it."""

    search_id: str
    number: int              # the batch's place in the search
    db_name: str
    statistics: object       # shards.DatabaseStatistics of the whole database
    options: object          # SearchOptions
    queries: list
    first_index: int


def _resident(request: BatchRequest) -> tuple:
    from distributed import get_worker

    plugin = get_worker().plugins[PLUGIN_NAME]
    return plugin, plugin.database(request.db_name, request.statistics)


def shard_prelim(request: BatchRequest, shard) -> dict:
    """A worker's task: the preliminary search of the batch against one shard; returns each
    query's preliminary hit list with its ranking keys, and keeps the search for the
    traceback."""
    from ..engine import prelim_hit_lists

    plugin, resident = _resident(request)
    plan, prelim = _shard_prelim(request, shard, plugin, resident)
    with resident.lock:
        resident.pending[(request.search_id, request.number, shard.index)] = (plan, prelim)
    return prelim_hit_lists(prelim, request.options)


def _shard_prelim(request: BatchRequest, shard, plugin, resident) -> tuple:
    """(plan, PrelimHits) of the batch against the shard: its subjects' preliminary HSPs as one
    search of the whole database finds them (shards.shard_windows)."""
    from ..engine import PrelimHits, ungapped_in_database_order
    from ..timing import StageTimes
    from ..ungapped import DiagonalHash

    options = request.options
    pool = plugin.pool(options.num_threads)
    search = resident.search(options, StageTimes())
    plan = search.plan(request.queries, request.first_index, pool)
    prelim = PrelimHits()
    if plan.table is None:
        return plan, prelim
    engine = search.engine()
    replay = ungapped_in_database_order(plan.table)
    kept = resident.kept_ordinals(shard)
    for window in resident.shard_windows(shard, replay):
        if replay:
            plan.diag_hash = DiagonalHash(len(plan.diag_hash.parts))
            plan.diag_hash.offset = window.hash_offset
        for volume, subjects in window.pieces:
            first = volume.first_ordinal
            gapped = engine.initial_hits(plan, volume, pool, subjects=subjects)
            gapped = gapped.of_subjects(kept[first:first + volume.num_seqs])
            volume_hits = PrelimHits()
            gapped.file_subjects(gapped.subject_hits(gapped.extend_later(pool)(), pool)(),
                                 volume_hits)
            volume_hits.tails = engine.tails_ahead(volume_hits.by_query, plan)
            prelim.merge(volume_hits)
    return plan, prelim


def shard_traceback(request: BatchRequest, shard, survivors: dict) -> list:
    """A worker's task: the traceback of the shard's subjects that survived the merge
    ({query index: ordinals}); returns (query index, ordinal, final Hsps) for each. A worker
    without the batch's preliminary search (it ran on a worker since lost) redoes it."""
    from ..engine import GROUPS_PER_THREAD, PrelimHits

    plugin, resident = _resident(request)
    with resident.lock:
        held = resident.pending.pop((request.search_id, request.number, shard.index), None)
    plan, prelim = held or _shard_prelim(request, shard, plugin, resident)
    picked = PrelimHits()
    for q, ordinals in survivors.items():
        for ordinal in ordinals.tolist():
            picked.add(q, ordinal, prelim.by_query[q][ordinal])
            tails = prelim.tails.get((q, ordinal))
            if tails is not None:
                picked.tails[(q, ordinal)] = tails
    if not picked.by_query:
        return []
    from ..timing import StageTimes

    pool = plugin.pool(request.options.num_threads)
    engine = resident.search(request.options, StageTimes()).engine()
    groups = engine.trace_groups(engine.trace_tasks(picked), GROUPS_PER_THREAD * pool.threads)
    traced = pool.map(lambda group: engine.trace_group(group, plan), groups)
    return [(task.query_index, ordinal, hsps) for group, pairs in zip(groups, traced)
            for task, (ordinal, hsps) in zip(group.tasks, pairs)]


def replicate_batch(request: BatchRequest) -> list:
    """A worker's task: the whole batch against the whole database (serial.search_batch);
    its QueryResults."""
    from ..timing import StageTimes
    from .serial import search_batch

    plugin, resident = _resident(request)
    search = resident.search(request.options, StageTimes())
    return search_batch(search, request.queries, request.first_index,
                        plugin.pool(request.options.num_threads))


def forget_search(search_id: str, dask_worker=None) -> None:
    """Run on every worker (Client.run): drop what it still holds of a search (a failed
    one's preliminary searches)."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    for resident in getattr(plugin, "databases", {}).values():
        with resident.lock:
            for key in [key for key in resident.pending if key[0] == search_id]:
                del resident.pending[key]


def worker_device_memory(dask_worker=None) -> int | None:
    """Run on every worker (Client.run): the device memory its backend may hold volumes in;
    None on a CPU worker."""
    backend = dask_worker.plugins[PLUGIN_NAME].backend()
    return backend.volume_budget() if backend.capabilities.preloads else None


def load_database(name: str, shard=None) -> None:
    """A worker's task: open a database and copy its (shard's) volumes to the device."""
    from distributed import get_worker

    get_worker().plugins[PLUGIN_NAME].database(name).load(shard)


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

        self.statistics = DatabaseStatistics.of(self.db)
        self.workers = worker_addresses(self.client)
        self.mode = choose_mode(self.spec, self.db, self.workers, self._device_memory(),
                                query_batch_letters(self.options))
        self.shards = self._shards() if self.mode == "shard" else []

    def _device_memory(self) -> int | None:
        if self.spec.mode != "auto" or self.spec.shards or len(self.workers) < 2:
            return None
        found = self.client.run(worker_device_memory)
        sizes = [size for size in found.values() if size is not None]
        return min(sizes) if sizes else None

    def _shards(self) -> list:
        from ..shards import contiguous_shards

        return contiguous_shards(self.db, self.spec.shards or len(self.workers))

    def results(self, queries):
        """Each query with its QueryResult, in input order."""
        for pairs in self.batch_results(queries):
            yield from pairs

    def batch_results(self, queries):
        """Each batch's [(query, QueryResult)], in input order."""
        from ..engine import query_batches

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

    def _task_key(self, what: str, request: BatchRequest, shard=None) -> str:
        part = "" if shard is None else f"-{shard.index}"
        return f"gblastn-{what}-{self.search_id}-{request.number}{part}"

    def _submit(self, request: BatchRequest) -> list:
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

    def _finish(self, request: BatchRequest, futures: list):
        from ..engine import merged_hit_lists, query_result

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
    if spec.shards > 1:
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
