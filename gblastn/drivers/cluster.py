"""The cluster driver: one search on the workers of a Dask cluster, whose results are the
single-process search's, byte for byte.

Two modes:

* shard: each worker searches its shard of the database (shards.py) for every query batch,
  with the whole database's statistics and ordinals, and returns each query's preliminary hit
  list with BLAST's ranking keys (engine.prelim_hit_lists); each shard merges them to the
  database's lists (engine.merged_hit_lists) and traces its own subjects that survived,
  where their preliminary HSPs are, and a worker makes each query's result from the traced
  subjects (engine.query_results: BLAST's final order, max_target_seqs, then max_hsps and
  the query coverage test). A batch's tasks are submitted as one chain, their data passing
  from worker to worker.
* replicate: each worker holds the whole database; whole batches go to the workers, each
  searched there by the pipeline driver (its traceback and output run on beside the next
  batch's preliminary search once its extensions are counted); the batches are BLAST's,
  so the results are the same. The search's last batch may go to several workers
  instead, each over a contiguous shard of the database, merged as in shard mode, where
  whole batches would leave the others idle at the end.

blastn sizes each query batch from the ungapped extensions the one before kept
(engine.QueryBatchSizes; only the counts come back here). In shard mode a batch is formed
once the previous one's preliminary search is in, and its preliminary searches run over the
shards at once. In replicate mode the next batches are forecast (engine.ForecastBatches: a
run of batches keeps its size; the second is guessed at the largest size before the first
count) and searched on the other workers meanwhile; a forecast the counts prove wrong is
cancelled and formed again. Each batch's traceback and formatting
overlap the next batches' preliminary searches. Auto mode replicates the database where
every worker's device holds it, and shards it where one does not.

The workers also format each query's output (its text), which this process writes: it
imports neither numba nor the compiled stages, and waits for nothing but the extension
counts and the outputs.

Workers keep what they opened between searches (ResidentDatabases, a worker plugin): the
database, its volumes' subject buffers, its contiguous shards and, on a GPU worker, the
backend with its CUDA context and the volumes copied to the device. Tasks of a shard go to
the same worker each time; a worker lost mid-search has its tasks rerun elsewhere by the
scheduler (a traceback task that finds no preliminary search of its batch there redoes it),
and a search that cannot finish fails with one line, leaving no output (run.py's
OutputFiles).
"""

import contextlib
import os
import sys
import uuid
from collections import deque
from dataclasses import dataclass, field

from ..errors import ClusterError, GblastnError, MissingPackageError, OptionsError
from ..options import LOCAL_ONLY_OPTIONS

MODES = ("auto", "shard", "replicate")
BATCHES_AHEAD = 2            # batches in flight beyond the one waited for, per worker
PRELIMS_PER_WORKER = 2       # a worker's preliminary searches in flight
# A batch's work for dealing (_work), from served megablast runs where a batch took about
# a fixed time plus a time per query letter: synth 1G on 8 CPU threads a worker, synth 8G
# on an H200 each (docs/perf/scale-out.md)
BATCH_PASS_LETTERS = 300_000
SETUP_SHARE = 0.1
WORKERS_WAIT_SECONDS = 60    # how long a search waits for a cluster's first worker
STRANDED_CHECK_SECONDS = 10  # how often a waiting search looks for tasks left unrunnable
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
    # the shard of each ordinal, any assignment (shards.shards_of), instead of `shards` runs
    assignment: object = None
    # a search sent through gblastn serve's door (served.py) waits for what each worker's
    # tasks spent (-stage_times shows it) only when asked to
    worker_shares: bool = True

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


def local_cluster(workers: int, device: str, threads: int = 1):
    """A cluster on this host: a worker per GPU, each seeing its own GPU as device 0
    (gpu_workers.py), on the first `workers` GPUs (all of them for 0) where there are GPUs
    and the device allows; else `workers` CPU worker processes. Each worker runs one gblastn task
    at a time, on `threads` threads of its own."""
    import logging

    from .gpu_workers import gpu_cluster, visible_gpus

    distributed = _distributed()
    gpus = [] if device == "cpu" else visible_gpus()
    if device == "gpu" and not gpus:
        from ..errors import GpuUnavailableError
        raise GpuUnavailableError("-device gpu: no GPU found for the cluster's workers "
                                  "(nvidia-smi and NVML show none)")
    env = {"OMP_NUM_THREADS": str(threads)}
    if gpus:
        return gpu_cluster(distributed, gpus[:workers] if workers else gpus, env, logging.ERROR)
    return distributed.LocalCluster(n_workers=max(1, workers), processes=True,
                                    threads_per_worker=1, dashboard_address=":0",
                                    silence_logs=logging.ERROR, env=env)


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


def refuse_local_only(options) -> None:
    """The workers search their shards of the whole database, unrestricted and unmasked:
    the options that restrict or mask it are refused."""
    restricting = [name for name in LOCAL_ONLY_OPTIONS if getattr(options, name) is not None]
    if restricting:
        raise OptionsError(f"-{restricting[0]} is not supported by gblastn's cluster "
                           "searches: search in one process")


def worker_addresses(client) -> list:
    """The cluster's workers as its scheduler knows them now: the client's own list lags
    behind a worker that its nanny restarted under a new address, and a task placed on an
    address that is gone waits for it for ever, allow_other_workers or not."""
    return sorted(client.nthreads())


# ----------------------------------------------------------------------------------------------
# the search, from this process


@dataclass
class ClusterSearch:
    """One search on a cluster: `db` opened here too (the statistics and the output's
    header and footer come from it), `db_name` as the workers open it; `times` (a
    StageTimes) is told of the time spent waiting for the cluster and, in its notes, of the
    split and of each worker's tasks. `statistics`, the database's DatabaseStatistics when
    already made (a checksum of every subject's length: 0.37 s for 10 million subjects)."""

    client: object
    spec: ClusterSpec
    db: object
    db_name: str
    options: object
    times: object = None
    search_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    statistics: object = None

    def __post_init__(self):
        from ..hspfilters import has_query_filter
        from ..shards import DatabaseStatistics
        from ..timing import StageTimes

        refuse_local_only(self.options)
        self.times = self.times if self.times is not None else StageTimes()
        if self.statistics is None:
            self.statistics = DatabaseStatistics.of(self.db)
        self.workers = worker_addresses(self.client)
        self.mode = choose_mode(self.spec, self.workers, self._device_memory(),
                                int(self.db.total_letters) // 4)
        filtered = has_query_filter(self.options)
        if filtered:
            self.mode = _mode_for_query_filters(self.spec)
        self.shards = self._shards() if self.mode == "shard" else []
        # a replicated search's last batch may go to several workers, each over a shard
        self.split_last = self.mode == "replicate" and not filtered
        self.requests_made = 0  # the search's batches so far: their task keys' numbers
        self.forecasts_dropped = 0
        self.last_split = 1     # the workers the last batch went to (replicate mode)
        self.dealt: dict = {}   # worker address -> the work dealt to it (_work)
        self.spent: dict = {}   # worker address -> what its tasks spent (resident.forget_search)

    def _device_memory(self) -> int | None:
        """The least device memory a worker may hold volumes in, None without GPU workers;
        asked only where the auto mode needs it."""
        if self.spec.mode != "auto" or self.spec.shards > 1 or self.spec.assignment is not None \
                or len(self.workers) < 2:
            return None
        from .resident import worker_device_memory

        found = [size for size in self.client.run(worker_device_memory).values()
                 if size is not None]
        return min(found) if found else None

    def split(self) -> str:
        """How the search is split, in words (for -stage_times)."""
        workers = f"{len(self.workers)} worker{'s' if len(self.workers) != 1 else ''}"
        if self.mode == "replicate":
            return f"{workers}, the database replicated"
        return f"{workers}, the database in {len(self.shards)} shard" + \
            ("s" if len(self.shards) != 1 else "")

    def _shards(self) -> list:
        """The search's shards: the given assignment's, or contiguous ones, named (each
        worker cuts them from its copy of the database, once: the cuts read the diagonal
        hash's resets of every subject with compiled code this process need not load)."""
        from ..shards import ContiguousShard, contiguous_count, shards_of

        if self.spec.assignment is not None:
            if len(self.spec.assignment) != self.db.num_seqs:
                raise OptionsError(f"the shard assignment names {len(self.spec.assignment)} "
                                   f"sequences; the database has {self.db.num_seqs}")
            return shards_of(self.spec.assignment)
        count = contiguous_count(self.spec.shards or len(self.workers), self.db.num_seqs)
        return [ContiguousShard(index, count) for index in range(count)]

    def results(self, queries):
        """Each query with its QueryResult, in input order."""
        for batch, results in self._outputs(queries, None):
            yield from zip(batch, results)

    def texts(self, queries, report, render_here):
        """Each query's output text by `report` (an output format), in input order: made on
        the workers, which hold the database's titles and their own threads; or here, by
        `render_here` ([(query, QueryResult)] -> texts), for a report that keeps every
        query until its footer (SAM)."""
        for _, texts in self.batch_texts(queries, report, render_here):
            yield from texts

    def batch_texts(self, queries, report, render_here):
        """(a batch's queries, their output texts) of each batch in turn, as texts()."""
        if getattr(report, "keeps_queries", False):
            for batch, results in self._outputs(queries, None):
                yield batch, render_here(list(zip(batch, results)))
            return
        yield from self._outputs(queries, report)

    def _outputs(self, queries, report):
        """(queries, their outputs) of each batch in turn: QueryResults, or their texts by
        `report`. Each worker's share of the search is noted at the end."""
        from ..engine import ForecastBatches, QueryBatchSizes

        sizes = QueryBatchSizes(self.options.task, int(self.db.total_letters))
        # a guess at the second batch is searched beside the first, or planned beside it
        submitted = self._forecast(ForecastBatches(queries, sizes, guess_second=True), report)
        try:
            yield from self._in_flight(submitted)
        except GblastnError:
            raise
        except Exception as exc:  # noqa: BLE001 - the cluster's failures, as one line
            raise ClusterError(_failure(exc)) from None
        finally:
            self._forget()

    def _in_flight(self, submitted):
        """Keep a few batches a worker in flight beyond the one waited for (their tracebacks
        and formatting)."""
        ahead = len(self.workers) * BATCHES_AHEAD
        in_flight = deque()
        for piece in submitted:
            in_flight.append(piece)
            while len(in_flight) > ahead:
                yield self._wait(*in_flight.popleft())
        while in_flight:
            yield self._wait(*in_flight.popleft())

    def _forecast(self, batches, report):
        """The batches on the workers, PRELIMS_PER_WORKER preliminary searches in flight for
        each worker: the batches after the first uncounted one are forecasts
        (ForecastBatches), and a forecast the counts prove wrong is cancelled with those
        after it and formed again. A worker's forecast batch is planned beside the batch
        before it and searched as soon as that one is, rather than once its count has come
        here and the next batch has gone out. Yields (a batch's queries, the Future of their
        outputs) for the batches that stand, in order."""
        from ..query import mark_unsearched_batch

        spread = len(self.workers) if self.mode == "replicate" else 1
        uncounted = deque()  # (request, its parts, [Futures of its extensions],
        #                      Future of its outputs)
        while True:
            while len(uncounted) < PRELIMS_PER_WORKER * spread:
                formed = batches.next_batch()
                if formed is None:
                    break
                self._live_workers()
                request = self._request(mark_unsearched_batch(formed[1]), formed[0])
                uncounted.append((request, *self._submit(request, not batches.queries_left(),
                                                         report)))
            if not uncounted:
                return
            request, _, extensions, outputs = uncounted.popleft()
            with self.times.stage("cluster wait"):
                dropped = batches.counted(sum(self._results(extensions)))
            if dropped:
                self._drop([uncounted.pop() for _ in range(dropped)])
            yield request.queries, outputs

    def _submit(self, request, last: bool, report) -> tuple:
        """A batch's tasks: over every shard (shard mode), or whole on the worker dealt the
        least work (replicate mode; the last batch may be shared, _deal). (its parts: the
        shards' indices or [None], [the Futures of its extensions], the Future of its
        outputs)."""
        if self.mode == "shard":
            extensions, outputs = self._submit_sharded(request, report)
            return [shard.index for shard in self.shards], extensions, outputs
        return self._submit_dealt(request, self._deal(request.queries, last), report)

    def _drop(self, forecasts: list) -> None:
        """Cancel forecast batches the counts proved wrong; their workers keep none of
        their preliminary searches (a task already running ends, and is not kept). Their
        letters stay dealt: a worker still running one would take the next batch late."""
        from .resident import drop_forecasts

        self.forecasts_dropped += len(forecasts)
        self.client.cancel([future for _, _, extensions, outputs in forecasts
                            for future in (*extensions, outputs)])
        self.client.run(drop_forecasts, self.search_id,
                        [(request.number, part) for request, parts, *_ in forecasts
                         for part in parts])

    def _deal(self, batch: list, last: bool = False) -> list:
        """The workers to search `batch` (replicate mode): the one dealt the least work so
        far (_work), the first of them in the cluster's order; dealt in turn, batches whose
        sizes alternate (blastn's largest and smallest, where the queries find next to
        nothing) all went to one worker. The search's last batch goes to the k least dealt
        workers, each over 1/k of the database, for the k that ends their dealing lowest
        (water filling): the batches are BLAST's, so whole ones leave one worker a batch
        behind the others at the end."""
        from ..shards import contiguous_count

        letters = _letters(batch)
        order = sorted(range(len(self.workers)),
                       key=lambda index: (self.dealt.get(self.workers[index], 0), index))
        count = 1
        if last and self.split_last:
            loads = [self.dealt.get(self.workers[index], 0) for index in order]
            count = min(range(1, len(order) + 1),
                        key=lambda k: (loads[k - 1] + _work(letters, k), k))
            count = contiguous_count(count, self.db.num_seqs)
        if last:
            self.last_split = count
        for index in order[:count]:
            address = self.workers[index]
            self.dealt[address] = self.dealt.get(address, 0) + _work(letters, count)
        return order[:count]

    def _wait(self, queries: list, future) -> tuple:
        """(a batch's queries, their outputs)."""
        with self.times.stage("cluster wait"):
            return queries, self._results([future])[0]

    def _request(self, batch: list, first_index: int):
        """A BatchRequest for `batch`, numbered across the search (a batch formed again gets
        a new number)."""
        from .resident import BatchRequest

        request = BatchRequest(self.search_id, self.requests_made, self.db_name,
                               self.statistics, self.options, batch, first_index)
        self.requests_made += 1
        return request

    def _task_key(self, what: str, request, index=None) -> str:
        part = "" if index is None else f"-{index}"
        return f"gblastn-{what}-{self.search_id}-{request.number}{part}"

    def _held(self, request, worker: int):
        """The request held on a worker (a task that returns it): the scheduler sends its
        queries once, and again should that worker be lost; tasks there read them from its
        memory, tasks elsewhere from that worker."""
        from .resident import held_request

        return self.client.submit(held_request, request, pure=False,
                                  key=self._task_key("request", request, worker),
                                  **self._placement(worker))

    def _submit_dealt(self, request, workers: list, report) -> tuple:
        """A replicated search's batch on the workers dealt it: whole on one, or over as
        many contiguous shards of the database as workers (the merge of shard mode, on
        workers that each hold the whole database). (its parts: None or the shards'
        indices, [the Futures of its extensions], the Future of its outputs)."""
        from ..shards import ContiguousShard

        if len(workers) == 1:
            extensions, outputs = self._submit_replicated(request, workers[0], report)
            return [None], [extensions], outputs
        shards = [ContiguousShard(index, len(workers)) for index in range(len(workers))]
        extensions, outputs = self._submit_sharded(request, report, shards, workers)
        return list(range(len(workers))), extensions, outputs

    def _submit_replicated(self, request, worker: int, report) -> tuple:
        """Replicate mode: the batch's preliminary search on `worker`, and its traceback and
        formatting there after it, which leave the worker's task slot to the next batch's
        preliminary search. (the Future of its extensions, the Future of its outputs)."""
        from .resident import replicate_finish, replicate_prelim

        held = self._held(request, worker)
        prelim = self.client.submit(replicate_prelim, held, report, pure=False,
                                    key=self._task_key("prelim", request),
                                    **self._placement(worker))
        outputs = self.client.submit(replicate_finish, held, prelim, report, pure=False,
                                     key=self._task_key("finish", request),
                                     **self._placement(worker))
        return prelim, outputs

    def _submit_sharded(self, request, report, shards=None, workers=None) -> tuple:
        """Shard mode: a batch's tasks on the shards (the search's, or `shards` on the worker
        indices `workers`, shard k on the k-th modulo their number), as one chain submitted at
        once: each shard's preliminary search, each shard's traceback of its subjects that
        survive the merge of their hit lists, and the results (and texts) made from the
        traced subjects, on each worker in turn. The data goes from worker to worker; this
        process reads only each shard's count of extensions. ([the Futures of the shards'
        extensions], the Future of the outputs)."""
        from .resident import extensions_kept, finish_batch, shard_prelim, shard_traceback

        shards = self.shards if shards is None else shards
        workers = list(range(len(self.workers))) if workers is None else workers
        held = [self._held(request, worker) for worker in workers[:len(shards)]]

        def on_its_worker(task, what: str, shard, *args):
            return self.client.submit(task, *args, pure=False,
                                      key=self._task_key(what, request, shard.index),
                                      **self._placement(workers[shard.index % len(workers)]))

        prelims = [on_its_worker(shard_prelim, "prelim", shard,
                                 held[shard.index % len(workers)], shard) for shard in shards]
        extensions = [on_its_worker(extensions_kept, "extensions", shard, prelim)
                      for shard, prelim in zip(shards, prelims)]
        traced = [on_its_worker(shard_traceback, "traceback", shard,
                                held[shard.index % len(workers)], shard, prelims)
                  for shard in shards]
        # the batches' results and texts made on each worker in turn
        finisher = request.number % len(held)
        outputs = self.client.submit(finish_batch, held[finisher], traced, report, pure=False,
                                     key=self._task_key("finish", request),
                                     **self._placement(workers[finisher]))
        return extensions, outputs

    def _placement(self, index: int) -> dict:
        """The tasks of shard (or replicated batch) `index` go to one worker, the same for a
        shard every time, where its volumes are resident; to another when that one is
        lost."""
        return {"workers": [self.workers[index % len(self.workers)]],
                "allow_other_workers": True}

    def _results(self, futures: list) -> list:
        """The futures' results. Dask leaves a task unrunnable where the workers it is placed
        on are gone (a worker restarted under another address) at a moment no worker runs,
        allow_other_workers or not: such tasks of this search are sent on (schedule_stranded)
        whenever the wait lasts STRANDED_CHECK_SECONDS."""
        results = []
        for future in futures:
            while True:
                try:
                    results.append(future.result(timeout=STRANDED_CHECK_SECONDS))
                    break
                except TimeoutError:
                    if future.status == "error":  # the task's own (a TimeoutError too)
                        raise future.exception() from None
                    if not future.done():  # else it finished as the wait ran out
                        self.client.run_on_scheduler(schedule_stranded, self.search_id)
        return results

    def _live_workers(self) -> None:
        """Place the next batch's tasks on the workers alive now (one lost and restarted
        mid-search has another address)."""
        workers = worker_addresses(self.client)
        if not workers:
            try:
                self.client.wait_for_workers(1, timeout=WORKERS_WAIT_SECONDS)
            except TimeoutError:
                raise ClusterError("the cluster search failed: every worker was lost") \
                    from None
            workers = worker_addresses(self.client)
        self.workers = workers

    def _forget(self) -> None:
        """Each worker drops what it still holds of the search and tells what its tasks
        spent, which the notes show (summed over the calls of a search per query file)."""
        from .resident import forget_search

        with contextlib.suppress(Exception):
            for address, spent in self.client.run(forget_search, self.search_id).items():
                if spent is not None:
                    _add_spent(self.spent.setdefault(address, {"tasks": 0.0, "stages": {}}),
                               spent)
        self.times.notes["batches"] = (f"{self.requests_made} formed, "
                                       f"{self.forecasts_dropped} forecasts dropped" +
                                       (f", the last on {self.last_split} workers"
                                        if self.last_split > 1 else ""))
        if self.spent:
            self.times.notes["workers"] = " / ".join(
                _spent_text(spent) for _, spent in sorted(self.spent.items()))


def _work(letters: int, shares: int = 1) -> float:
    """A share of a batch of `letters` query letters searched in `shares` shares, in query
    letters' worth of work: the batch's pass over the database costs about as much as
    BATCH_PASS_LETTERS of queries, and each share makes the batch's query setup again,
    about SETUP_SHARE of the letters' work."""
    return (BATCH_PASS_LETTERS + letters * (1 - SETUP_SHARE)) / shares + letters * SETUP_SHARE


def _letters(queries: list) -> int:
    return sum(len(query) for query in queries)


def _add_spent(total: dict, spent: dict) -> None:
    total["tasks"] += spent["tasks"]
    for stage, seconds in spent["stages"].items():
        total["stages"][stage] = total["stages"].get(stage, 0.0) + seconds


def _spent_text(spent: dict) -> str:
    """One worker's share: its tasks' wall time, and its stages summed over its threads."""
    stages = ", ".join(f"{stage} {seconds:.2f}s" for stage, seconds in spent["stages"].items()
                       if seconds >= 0.005)
    return f"tasks {spent['tasks']:.2f}s ({stages})"


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


def schedule_stranded(search_id: str, dask_scheduler=None) -> int:
    """Run on the scheduler (Client.run_on_scheduler): the search's tasks left unrunnable
    while workers run are sent to processing, where Dask's choice of a worker lets them go
    to any worker (their restrictions are loose); it re-checks unrunnable tasks only when a
    worker joins, and then only against their restrictions. Returns how many were sent."""
    if not dask_scheduler.running:
        return 0
    stranded = [ts.key for ts in dask_scheduler.unrunnable if search_id in str(ts.key)]
    if stranded:
        dask_scheduler.transitions({key: "processing" for key in stranded},
                                   stimulus_id=f"gblastn-stranded-{search_id}")
    return len(stranded)


def choose_mode(spec: ClusterSpec, workers: list, device_memory: int | None = None,
                db_bytes: int = 0) -> str:
    """shard or replicate. Forced by -cluster_mode, or shard with -shards; else replicate
    (whole batches on each worker, several at once: ForecastBatches) where every worker's
    device holds the whole database's `db_bytes` (`device_memory`: the least a worker's
    device may hold, None for CPU workers, which read the database from host memory), and
    shard where one does not."""
    if spec.mode != "auto":
        return spec.mode
    if spec.shards > 1 or spec.assignment is not None:
        return "shard"
    if len(workers) > 1 and device_memory is not None and db_bytes > device_memory:
        return "shard"
    return "replicate"


def _mode_for_query_filters(spec: ClusterSpec) -> str:
    """Culling and the best-hit filter see every subject of a query at once, in database
    order: a worker searches whole batches (replicate), which -shards or -cluster_mode
    shard would not let it."""
    if spec.mode == "shard" or spec.shards > 1 or spec.assignment is not None:
        raise OptionsError("-culling_limit and -best_hit_* see the whole database at once: "
                           "not with -shards or -cluster_mode shard")
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
