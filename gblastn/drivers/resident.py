"""What the workers of a cluster search keep and run (drivers/cluster.py schedules them).

ResidentDatabases, a Dask worker plugin, keeps on each worker the databases it opened
(ResidentDatabase: the volumes' subject buffers, the shards' windows, the database's
contiguous shards) and the scan backend: a GPU worker's CUDA context and the volumes it
copied to the device stay there from one search to the next. The tasks drive the engine's
stages as the one-process drivers do, on the worker's own threads: a replicated batch is
searched by the pipeline driver (ReplicatedRun), whose count of extensions sizes the next
batch while its traceback and output run on beside the next batch's search; a shard's batch
goes through the preliminary search, the merge of the shards' hit lists and the traceback.
The workers also format the output (the report's render), so that the searching process
only writes it.
"""

import contextlib
import logging
import threading
import time
from concurrent.futures import InvalidStateError
from dataclasses import dataclass, field, replace

import numpy as np
from distributed import WorkerPlugin, get_worker

from ..timing import StageTimes

PLUGIN_NAME = "gblastn-resident"
PRELOADED_TASK = "megablast"  # blastn's default task, whose stages a preloading worker loads


class ResidentDatabases(WorkerPlugin):
    """A Dask worker plugin: on each worker, the databases it opened
    (ResidentDatabase, by name), the scan backend (a GPU's CUDA context and resident volumes
    are made once per worker process) and thread pools, kept across searches. `preload`
    names a database to open, and to copy to the device, when the worker starts. `threads`,
    when given (gblastn serve's -num_threads), is what every search uses on the worker,
    whatever threads the search asked for: the cluster's owner sized it for the host."""

    idempotent = True  # a search joining a served cluster keeps what the workers hold

    def __init__(self, device: str = "auto", gpu_id: int = 0, preload: str | None = None,
                 shard=None, threads: int | None = None):
        self.device, self.gpu_id, self.preload, self.shard = device, gpu_id, preload, shard
        self.threads = threads

    def setup(self, worker=None) -> None:
        from ..pools import collect_rarely

        collect_rarely()  # the worker's process runs searches only
        self.lock = threading.Lock()
        self.databases: dict = {}
        self.pools: dict = {}
        self.run_pools: dict = {}
        self.searches: dict = {}  # search id -> SearchOnWorker
        self._backend = None
        self.loading = None
        if self.preload is not None:
            # beside the worker's event loop, which must keep answering the scheduler
            self.loading = threading.Thread(target=self._load, name="gblastn-preload",
                                            daemon=True)
            self.loading.start()

    def _load(self) -> None:
        """The preloaded database with its diagonal-hash resets (where contiguous shards are
        cut), then the compiled stages of blastn's default task: a served cluster's first
        search finds them made and loaded (numba loads each stage's machine code at its
        first call, 0.5-1 s in all)."""
        from ..compile_ahead import load_compiled_stages

        try:
            resident = self.database(self.preload)
            resident.load(self.shard)
            resident.resets()
            load_compiled_stages(PRELOADED_TASK, self.backend())
        except Exception:  # noqa: BLE001 - the searches meet it again and report it
            logging.getLogger("gblastn").exception("loading %s failed", self.preload)

    def teardown(self, worker=None) -> None:
        for resident in self.databases.values():
            resident.db.close()
        for pool in [*self.pools.values(), *self.run_pools.values()]:
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
            statistics.check(resident.statistics, name)
        return resident

    def pool(self, threads: int):
        from ..pools import TaskPool

        with self.lock:
            return self.pools.setdefault(threads, TaskPool(threads))

    def run_pool(self, threads: int):
        """The PriorityPool of `threads` threads that the batches' runs on this worker share
        (ReplicatedRun), as one search's batches share one in a process: a pool each gave
        two runs side by side twice the threads the cores have."""
        from ..pools import PriorityPool

        with self.lock:
            if threads not in self.run_pools:
                self.run_pools[threads] = PriorityPool(threads)
            return self.run_pools[threads]

    def options(self, options):
        """A search's options as this worker runs them: with its own threads, if it has."""
        if self.threads is None or self.threads == options.num_threads:
            return options
        return replace(options, num_threads=self.threads)

    @contextlib.contextmanager
    def task(self, search_id: str):
        """A task of the search runs: the StageTimes its stages are counted in on this
        worker (forget_search hands them back), its wall time added to the search's."""
        with self.lock:
            record = self.searches.setdefault(search_id, SearchOnWorker())
        started = time.perf_counter()
        try:
            yield record.times
        finally:
            with self.lock:
                record.task_seconds += time.perf_counter() - started

    def forget(self, search_id: str) -> "SearchOnWorker | None":
        with self.lock:
            return self.searches.pop(search_id, None)


@dataclass
class SearchOnWorker:
    """What one search's tasks spent on a worker: their stages, and their wall time."""

    times: StageTimes = field(default_factory=StageTimes)
    task_seconds: float = 0.0


class ResidentDatabase:
    """One opened database on a worker: its subject buffers (SubjectBuffers, kept across
    searches, as the GPU keeps their device copies), its statistics, its diagonal-hash
    resets, contiguous shards and shards' windows, and the preliminary searches waiting for
    their traceback."""

    def __init__(self, db, plugin: ResidentDatabases):
        from ..engine import SubjectBuffers
        from ..shards import DatabaseStatistics

        self.db, self.plugin = db, plugin
        self.statistics = DatabaseStatistics.of(db)  # once: every task checks against it
        self.buffers = SubjectBuffers(StageTimes())
        self.lock = threading.Lock()
        self.windows: dict = {}   # (shard key, replay, two-hit window) -> [ShardWindow]
        self.kept: dict = {}      # shard key -> bool per ordinal
        self.contiguous: dict = {}  # shard count -> [Shard]
        self.pending: dict = {}   # (search, batch, shard) -> (plan, PrelimHits) of a shard,
        #                           the ReplicatedRun of a whole batch (shard None)
        self.dropped: set = set()  # (search, batch, shard) of forecasts the search cancelled
        self.last_run: dict = {}  # search -> (number, extensions Future) of its last batch run
        self.last_turn: dict = {}  # search -> (number, Event set when it is searched) of the
        #                            last shard's preliminary search begun here
        self._resets: dict = {}   # two-hit window -> the database's HashResets

    def keep(self, key: tuple, found) -> bool:
        """Keep a preliminary search for its traceback, unless its batch was dropped (a
        cancelled forecast whose task ran on); whether it was kept."""
        with self.lock:
            if key in self.dropped:
                self.dropped.discard(key)
                return False
            self.pending[key] = found
            return True

    def drop(self, keys: list) -> None:
        """Forget the preliminary searches of cancelled batches, kept or still to come."""
        with self.lock:
            for key in keys:
                found = self.pending.pop(key, None)
                if found is None:
                    self.dropped.add(key)
                _cancel(found)

    def forget(self, search_id: str) -> None:
        """Drop what is left of a search."""
        with self.lock:
            for key in [key for key in self.pending if key[0] == search_id]:
                _cancel(self.pending.pop(key))
            self.last_run.pop(search_id, None)
            self.last_turn.pop(search_id, None)
            self.dropped = {key for key in self.dropped if key[0] != search_id}

    def count_before(self, search_id: str, number: int, extensions) -> object:
        """The count (a Future) that batch `number` of the search waits for before its jobs:
        that of the search's batch begun here last, where it comes before; None without one.
        `extensions`, batch `number`'s own count, is then the one a later batch waits for."""
        with self.lock:
            last_number, last = self.last_run.get(search_id, (-1, None))
            if number < last_number:
                return None
            self.last_run[search_id] = (number, extensions)
            return last

    @contextlib.contextmanager
    def prelim_turn(self, search_id: str, number: int):
        """A shard's preliminary search of the search's batch `number` scans and extends in
        this context once the one begun here before it has, as the pipeline's batches take
        turns: its query setup, made before, runs beside that one (a batch begun after a
        later one, run again, waits for none)."""
        done = threading.Event()
        with self.lock:
            last_number, last = self.last_turn.get(search_id, (-1, None))
            if number >= last_number:
                self.last_turn[search_id] = (number, done)
            else:
                last = None
        try:
            if last is not None:
                last.wait()
            yield
        finally:
            done.set()

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

    def resets(self, window: int = 0):
        """The database's HashResets for searches with this two-hit window."""
        with self.lock:
            if window not in self._resets:
                from ..shards import hash_resets
                self._resets[window] = hash_resets(self.db, window)
            return self._resets[window]

    def shard(self, shard):
        """The Shard a task names: itself, or the contiguous one it names (ContiguousShard),
        cut once for each count of shards."""
        from ..shards import ContiguousShard, contiguous_shards

        if not isinstance(shard, ContiguousShard):
            return shard
        with self.lock:
            made = self.contiguous.get(shard.count)
        if made is None:
            made = contiguous_shards(self.db, shard.count, self.resets())
            with self.lock:
                self.contiguous[shard.count] = made
        return made[shard.index]

    def shard_windows(self, shard, replay: bool, window: int) -> list:
        """The ShardWindows a search with this two-hit window searches the shard in."""
        from ..shards import shard_windows

        key = (shard.key, replay, window)
        resets = self.resets(window) if replay else None
        with self.lock:
            if key not in self.windows:
                self.windows[key] = shard_windows(self.db, shard.ordinals, replay, resets)
            return self.windows[key]

    def kept_ordinals(self, shard) -> np.ndarray:
        with self.lock:
            if shard.key not in self.kept:
                kept = np.zeros(self.db.num_seqs, dtype=bool)
                kept[shard.ordinals] = True
                self.kept[shard.key] = kept
            return self.kept[shard.key]


def _cancel(found) -> None:
    """Stop a batch's run that nothing will collect (a shard's preliminary search is done
    already)."""
    if isinstance(found, ReplicatedRun):
        found.cancel()


# ----------------------------------------------------------------------------------------------
# the workers' tasks


@dataclass
class BatchRequest:
    """Whole query batches of a search (one, or a run of them), as its tasks get them."""

    search_id: str
    number: int              # its place in the search
    db_name: str
    statistics: object       # shards.DatabaseStatistics of the whole database
    options: object          # SearchOptions
    queries: list
    first_index: int


def _resident(request: BatchRequest) -> tuple:
    plugin = get_worker().plugins[PLUGIN_NAME]
    return plugin, plugin.database(request.db_name, request.statistics)


def held_request(request: BatchRequest) -> BatchRequest:
    """A worker's task: the request itself, held in the worker's memory for the tasks that
    read it."""
    return request


def replicate_prelim(request: BatchRequest, report) -> int:
    """A worker's task: start the whole batch's search against the whole database
    (ReplicatedRun), kept for replicate_finish; returns the ungapped extensions it kept, from
    which the search sizes the next batch, as soon as they are counted. It leaves the
    worker's task slot first: a forecast batch sent to the worker is planned beside the
    batch before it, whose count its jobs wait for."""
    _leave_task_slot()
    plugin, resident = _resident(request)
    with plugin.task(request.search_id) as times:
        run = ReplicatedRun(request, report, plugin, resident, times)
        if not resident.keep((request.search_id, request.number, None), run):
            run.cancel()  # a forecast the search cancelled before it began
        return run.given.extensions.result()


def replicate_finish(request: BatchRequest, extensions: int, report) -> list:
    """A worker's task, after replicate_prelim (`extensions`, its result, only orders it
    after): each query's output text by `report`, or its QueryResult without one, in input
    order, once the batch's run ends. It leaves the worker's task slot first, so that the
    next batch's preliminary search, which may come to this worker, runs beside it. A
    worker without the batch's run (it ran on a worker since lost) runs it again."""
    _leave_task_slot()
    plugin, resident = _resident(request)
    with plugin.task(request.search_id) as times:
        with resident.lock:
            run = resident.pending.pop((request.search_id, request.number, None), None)
        if run is None:
            run = ReplicatedRun(request, report, plugin, resident, times)
        return run.outputs.result()


class ReplicatedRun:
    """A whole batch searched on a worker by the pipeline driver (a Pipeline given the
    batch), in a thread of its own that runs on after replicate_prelim returns the batch's
    count: its stages overlap as in a search in one process, where the serial driver's ran
    one after the other (each volume's subjects go to traceback as the volume's gapped
    pieces end, each query is formatted once its last subject is traced). `outputs` gets
    each query's text by `report`, or its QueryResult without one, in input order."""

    def __init__(self, request: BatchRequest, report, plugin, resident, times):
        from concurrent.futures import Future

        from .pipeline import GivenBatch, Pipeline
        from .run import RunSettings

        options = plugin.options(request.options)
        render = _renderer(report, resident.db, times) if report is not None else \
            (lambda pairs: [result for _, result in pairs])
        self.given = GivenBatch(request.first_index, number=request.number)
        self.given.after = resident.count_before(request.search_id, request.number,
                                                 self.given.extensions)
        self.outputs = Future()
        self.pipeline = Pipeline(resident.search(options, times), request.queries,
                                 RunSettings(), render, self.given,
                                 plugin.run_pool(options.num_threads))
        threading.Thread(target=self._run, name="gblastn-batch", daemon=True).start()

    def _run(self) -> None:
        try:
            self.outputs.set_result(list(self.pipeline.texts()))
        except BaseException as exc:  # noqa: BLE001 - handed to the tasks that wait
            self.outputs.set_exception(exc)
            # the planner may tell the count at this very moment
            with contextlib.suppress(InvalidStateError):
                self.given.extensions.set_exception(exc)

    def cancel(self) -> None:
        self.pipeline.cancel()


def _renderer(report, db, times):
    """[(query, QueryResult)] -> each query's text by `report`."""
    def render(pairs):
        with times.stage("output"):
            return report.render(pairs, db)
    return render


def shard_prelim(request: BatchRequest, shard) -> tuple:
    """A worker's task: the preliminary search of the batch against one shard; returns each
    query's preliminary hit list with its ranking keys (PackedHitLists) and the shard's
    ungapped extensions kept (the next batch's size follows from the shards' sum), and keeps
    the search for the traceback. It leaves the worker's task slot first: the next batch's
    preliminary search, a forecast, makes its query setup beside this one, and then waits
    for its turn (ResidentDatabase.prelim_turn)."""
    from ..engine import prelim_hit_lists
    from ..shards import PackedHitLists

    _leave_task_slot()
    plugin, resident = _resident(request)
    shard = resident.shard(shard)
    with plugin.task(request.search_id) as times:
        turn = resident.prelim_turn(request.search_id, request.number)
        plan, prelim = _shard_prelim(request, shard, plugin, resident, times, turn)
        resident.keep((request.search_id, request.number, shard.index), (plan, prelim))
        return PackedHitLists.of(prelim_hit_lists(prelim, request.options)), prelim.extensions


def extensions_kept(found: tuple) -> int:
    """A worker's task beside a shard_prelim's result: its ungapped extensions alone, all
    the searching process needs of it."""
    return found[1]


def _shard_prelim(request: BatchRequest, shard, plugin, resident, times, turn=None) -> tuple:
    """(plan, PrelimHits) of the batch against the shard: its subjects' preliminary HSPs as one
    search of the whole database finds them (shards.shard_windows). The batch is planned
    first, then searched in `turn` (a context)."""
    options = plugin.options(request.options)
    pool = plugin.pool(options.num_threads)
    search = resident.search(options, times)
    plan = search.plan(request.queries, request.first_index, pool)
    with turn or contextlib.nullcontext():
        return plan, _shard_prelim_hits(plan, shard, search, pool, resident, options)


def _shard_prelim_hits(plan, shard, search, pool, resident, options):
    """The planned batch's PrelimHits in the shard's subjects."""
    from ..engine import PrelimHits, ungapped_in_database_order

    prelim = PrelimHits()
    if plan.table is None:
        return prelim
    engine = search.engine()
    replay = ungapped_in_database_order(plan.table)
    kept = resident.kept_ordinals(shard)
    for window in resident.shard_windows(shard, replay, options.window_size):
        if replay:
            plan.diag_hash = plan.diag_hash.emptied()
            plan.diag_hash.offset = window.hash_offset
        for volume, subjects in window.pieces:
            first = volume.first_ordinal
            gapped = engine.initial_hits(plan, volume, pool, subjects=subjects)
            gapped = gapped.of_subjects(kept[first:first + volume.num_seqs])
            volume_hits = PrelimHits(extensions=gapped.extensions())
            gapped.file_subjects(gapped.subject_hits(gapped.extend_later(pool)(), pool)(),
                                 volume_hits)
            volume_hits.tails = engine.tails_ahead(volume_hits.by_query, plan)
            prelim.merge(volume_hits)
    return prelim


def shard_traceback(request: BatchRequest, shard, prelims: list):
    """A worker's task: the traceback of the shard's subjects that survive the merge of
    every shard's preliminary hit lists (in `prelims`, shard_prelim's; each traceback merges
    them, a sort of a few keys a query, rather than wait for a task of its own to); returns
    the final Hsps of each under its (query index, ordinal), packed. It leaves the worker's
    task slot first, so that the shard's preliminary search of the next batch runs beside
    it. A worker without the batch's preliminary search (it ran on a worker since lost)
    redoes it."""
    from ..engine import GROUPS_PER_THREAD, PrelimHits, merged_hit_lists
    from ..hsp import PackedHsps

    _leave_task_slot()
    plugin, resident = _resident(request)
    shard = resident.shard(shard)
    with plugin.task(request.search_id) as times:
        with resident.lock:
            held = resident.pending.pop((request.search_id, request.number, shard.index), None)
        plan, prelim = held or _shard_prelim(request, shard, plugin, resident, times)
        merged = merged_hit_lists([lists.unpacked() for lists, _ in prelims], request.options)
        picked = PrelimHits()
        for q, ordinals in _survivors_of(shard, merged).items():
            for ordinal in ordinals.tolist():
                picked.add(q, ordinal, prelim.by_query[q][ordinal])
                tails = prelim.tails.get((q, ordinal))
                if tails is not None:
                    picked.tails[(q, ordinal)] = tails
        if not picked.by_query:
            return PackedHsps.of([])
        options = plugin.options(request.options)
        pool = plugin.pool(options.num_threads)
        engine = resident.search(options, times).engine()
        groups = engine.trace_groups(engine.trace_tasks(picked, plan),
                                     GROUPS_PER_THREAD * pool.threads)
        traced = pool.map(lambda group: engine.trace_group(group, plan), groups)
        return PackedHsps.of([((task.query_index, ordinal), hsps)
                              for group, pairs in zip(groups, traced)
                              for task, (ordinal, hsps) in zip(group.tasks, pairs)])


def _leave_task_slot() -> None:
    """Run the rest of the task beside the worker's task slot (Dask's secede): a worker runs
    one task at a time, and a batch's traceback, say, would hold back the next batch's
    preliminary search. They share the worker's threads, as the stages of successive
    batches share them in the pipeline."""
    from distributed import secede

    secede()


def _survivors_of(shard, merged: dict) -> dict:
    """The merged lists' subjects ({query: ordinals}) that `shard` holds."""
    picked = {}
    for q, ordinals in merged.items():
        mine = ordinals[np.isin(ordinals, shard.ordinals, assume_unique=True)]
        if mine.size:
            picked[q] = mine
    return picked


def finish_batch(request: BatchRequest, traced_parts: list, report) -> list:
    """A worker's task: each query's result from the shards' traced subjects
    (engine.query_result: BLAST's final order, max_target_seqs), and its output text by
    `report`, or the QueryResult itself without one; in input order. It leaves the worker's
    task slot first, to the preliminary searches of the batches after."""
    from ..engine import query_results

    _leave_task_slot()
    traced = [[] for _ in request.queries]
    for found in traced_parts:
        for (q, ordinal), hsps in found.unpacked():
            traced[q].append((ordinal, hsps))
    results = query_results([(request.first_index + q, query, traced[q])
                             for q, query in enumerate(request.queries)], request.options)
    pairs = list(zip(request.queries, results))
    return _outputs(request, pairs, report)


def _outputs(request: BatchRequest, pairs: list, report) -> list:
    """Each (query, QueryResult)'s text by `report`, formatted on the worker's threads in runs
    of about equal lines; the QueryResults themselves without one."""
    from .serial import RENDER_RUNS_PER_THREAD, runs_of_lines

    if report is None:
        return [result for _, result in pairs]
    plugin, resident = _resident(request)
    with plugin.task(request.search_id) as times:
        pool = plugin.pool(plugin.options(request.options).num_threads)
        render = _renderer(report, resident.db, times)
        runs = runs_of_lines(pairs, RENDER_RUNS_PER_THREAD * pool.threads)
        return [text for texts in pool.map(render, runs) for text in texts]


def drop_forecasts(search_id: str, parts: list, dask_worker=None) -> None:
    """Run on every worker (Client.run) when a search cancels forecast batches (replicate
    mode), `parts` their (number, shard index or None for a whole batch): their preliminary
    searches, kept already or still running, are not kept for a traceback that will not
    come."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    for resident in getattr(plugin, "databases", {}).values():
        resident.drop([(search_id, number, part) for number, part in parts])


async def preloaded(timeout: float, dask_worker=None) -> bool:
    """Run on every worker (Client.run): wait, up to `timeout` seconds, for the worker's
    preload (ResidentDatabases._load) to end, beside its event loop; whether it has."""
    import asyncio

    loading = getattr(dask_worker.plugins.get(PLUGIN_NAME), "loading", None)
    if loading is None:
        return True
    await asyncio.to_thread(loading.join, timeout)
    return not loading.is_alive()


def worker_device_memory(dask_worker=None) -> int | None:
    """Run on every worker (Client.run): the device memory its backend may hold volumes in;
    None on a CPU worker."""
    backend = dask_worker.plugins[PLUGIN_NAME].backend()
    return backend.volume_budget() if backend.capabilities.preloads else None


def forget_search(search_id: str, dask_worker=None) -> dict | None:
    """Run on every worker (Client.run): drop what it still holds of a search (a failed
    one's preliminary searches); returns what the search's tasks spent there ({"tasks":
    wall seconds, "stages": seconds per stage}), None where it ran none."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    for resident in getattr(plugin, "databases", {}).values():
        resident.forget(search_id)
    record = plugin.forget(search_id) if plugin is not None else None
    if record is None:
        return None
    return {"tasks": record.task_seconds, "stages": record.times.seconds}
