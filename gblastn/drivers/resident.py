"""What the workers of a cluster search keep and run (drivers/cluster.py schedules them).

ResidentDatabases, a Dask worker plugin, keeps on each worker the databases it opened
(ResidentDatabase: the volumes' subject buffers, the shards' windows) and the scan backend: a
GPU worker's CUDA context and the volumes it copied to the device stay there from one search
to the next. The tasks (shard_prelim, shard_traceback, replicate_batch) drive the engine's
stages as the serial driver does, on the worker's own thread pool.
"""

import logging
import threading
from dataclasses import dataclass

import numpy as np
from distributed import WorkerPlugin, get_worker

PLUGIN_NAME = "gblastn-resident"


class ResidentDatabases(WorkerPlugin):
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
            # beside the worker's event loop, which must keep answering the scheduler
            threading.Thread(target=self._load, name="gblastn-preload", daemon=True).start()

    def _load(self) -> None:
        try:
            self.database(self.preload).load(self.shard)
        except Exception:  # noqa: BLE001 - the searches meet it again and report it
            logging.getLogger("gblastn").exception("loading %s failed", self.preload)

    def teardown(self, worker=None) -> None:
        for resident in self.databases.values():
            resident.db.close()
        for pool in self.pools.values():
            pool.close()

    def backend(self):
        """The worker's scan backend, selected once. -gpu_id picks among the GPUs the worker
        sees; a worker of gblastn's local clusters sees its own GPU first, as device 0
        (gpu_workers.py)."""
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
    groups = engine.trace_groups(engine.trace_tasks(picked, plan),
                                 GROUPS_PER_THREAD * pool.threads)
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
    get_worker().plugins[PLUGIN_NAME].database(name).load(shard)
