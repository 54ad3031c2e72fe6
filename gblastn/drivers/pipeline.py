"""The pipeline driver: the stages of successive query batches overlapped in threads joined
by four bounded queues, as G-BLASTN's pipeline mode did:

    reader ──query queue──► planner ──job queue──► prelim workers ──prelim queue──►
    collector ─(traceback tasks)─► CPU pool ──result queue──► writer (the caller's thread)

The reader streams the queries; the planner groups them into BLAST's batches and builds each
batch's masks, statistics and lookup table (engine.plan_batch), then posts one job per
(batch, part of a volume) (engine.volume_jobs). blastn sizes a batch from the ungapped
extensions of the one before (engine.QueryBatchSizes), so the planner posts the next batch
once every job of this one is through its ungapped stage (the second batch is planned beside
the first one's search, at the size it will most likely take: engine.ForecastBatches'
guess); the gapped stage and traceback still overlap the next batch's scan. Prelim workers
run the engine's preliminary search of their part (Engine.prelim_search: scan, ungapped
stage, and the score-only gapped extensions, in pieces, handed to the CPU pool); the
collector waits until every volume of a batch is in and posts the traceback tasks, one per
(query, subject), in groups of one compiled call each, to the same pool. The pool's threads
take gapped pieces before traceback groups (the next tracebacks wait for them), and groups
the most work first; the thread that traces a query's last subject formats its output; the
writer yields results in input order. Queue depths bound what is in flight, so a list of
100,000 queries is never held in memory at once. The numba stages release the GIL, so the
workers run in parallel.

The engine's ordering rule (engine.ungapped_in_database_order) is kept here with turnstiles:
the jobs of a batch pass the ungapped stage one at a time, in database order.

A failure in any thread stops every stage: the first error is re-raised in the writer. The
engine module is imported by the stage threads, not with this one: its import (numba's)
then runs beside the reader's first queries.
"""

import collections
import queue
import threading
import time
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field

POLL_SECONDS = 0.1  # how often a blocked thread looks at the stop flag
TRACE_BACKLOG = 8  # traceback groups waiting per CPU thread, at most
WHOLE_VOLUME_JOBS = 1  # jobs per volume when the backend scans whole volumes
# jobs per volume and prelim thread where the CPU scans: 8 and 16 were level with 4 on 16
# threads (docs/perf/whole-search.md)
CPU_JOBS_PER_THREAD = 4
MASK_AHEAD_LETTERS = 20_000  # the reader finds the masks of about this many letters a call
QUERIES_AHEAD = 256  # queries read and not yet taken by the planner, at most


class _Stop(Exception):
    """Raised inside a stage when another stage failed or the run was interrupted."""


_END = object()  # end-of-stream marker on a queue


class Pipeline:
    """The four-queue search pipeline over one database (see the module docstring)."""

    def __init__(self, search, queries, settings, render, given: "GivenBatch | None" = None,
                 pool=None):
        """`search`: a drivers.Search; `queries`: an iterable of the queries, in order;
        `given`: the queries are one batch already formed (GivenBatch) instead of blastn's
        batches formed here; `pool`: a PriorityPool the run shares with others (a cluster
        worker's runs), instead of one of its own."""
        threads = search.options.num_threads
        self.search, self.queries, self.given = search, queries, given
        self.shared_pool = pool
        self.read_order = collections.deque()  # the numbers read and not yet written
        self.masks_ahead: dict = {}  # query number -> its masks, found by the reader
        self.planned_through = -1  # the last query number planned
        self.masks_lock = threading.Lock()
        self.db, self.options = search.db, search.options
        self.settings = settings
        self.render = render  # [(query, result), ...] -> the queries' output texts
        # Within one batch the stages run one after the other (traceback needs every volume's
        # preliminary hits), so each stage may use all the threads; they only overlap
        # between batches, where the slight oversubscription keeps every core busy.
        self.prelim_threads = settings.prelim_threads or threads
        self.traceback_threads = settings.traceback_threads or threads
        depth = max(2, 2 * threads)
        self.query_q = queue.Queue(maxsize=QUERIES_AHEAD)
        self.job_q = queue.Queue(maxsize=depth)
        self.prelim_q = queue.Queue(maxsize=depth)
        self.result_q = queue.Queue(maxsize=4 * depth)
        # traceback tasks posted and not done: a bound on the preliminary hits held
        self.backlog = threading.BoundedSemaphore(TRACE_BACKLOG * self.traceback_threads)
        self.jobs = None  # (volume, subject range) pieces, made once the backend is known
        self.whole_volumes = False  # whether the backend scans whole volumes (the jobs share)
        self.volume_rank: dict = {}  # volume -> its place among the jobs' volumes
        self.pool = None  # the CPU pool (gapped pieces, traceback tasks), while texts() runs
        self.stop = threading.Event()
        self.batch_sizes = _ExtensionCounts(self.stop)
        self.errors: list = []
        self.lock = threading.Lock()

    # -- plumbing --------------------------------------------------------------------------

    def _put(self, q, item):
        while True:
            if self.stop.is_set():
                raise _Stop
            try:
                q.put(item, timeout=POLL_SECONDS)
                return
            except queue.Full:
                continue

    def _get(self, q):
        while True:
            if self.stop.is_set():
                raise _Stop
            try:
                return q.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue

    @contextmanager
    def _failure_stops_the_run(self):
        """Any error inside is handed to the writer thread and stops every stage."""
        try:
            yield
        except _Stop:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the writer thread
            with self.lock:
                self.errors.append(exc)
            self.stop.set()

    def _run(self, name, body):
        def target():
            with self._failure_stops_the_run():
                body()
        thread = threading.Thread(target=target, name=f"gblastn-{name}", daemon=True)
        thread.start()
        return thread

    # -- stages ----------------------------------------------------------------------------

    def _reader(self):
        """Reads the queries and hands them on at once; their masks are found ahead,
        MASK_AHEAD_LETTERS at a time, only while the planner takes no more queries (the
        queue is full: it waits for a batch's extension count, which sizes the next batch)
        and after the last query, and only for queries not planned by then. Masked here
        before they were handed on, the queries reached the planner at one thread's masking
        pace, and the second batch, planned beside the first one's search, began after
        all of its queries' masks (0.25 s on 5 Mbp of queries)."""
        unmasked = collections.deque()  # (number, query) handed on, not planned nor masked
        first = 0 if self.given is None else self.given.first_index
        for number, query in enumerate(self.queries, first):
            self.read_order.append(number)
            item = (number, query)
            while not self._offer(self.query_q, item):
                if not self._mask_ahead(unmasked):
                    self._put(self.query_q, item)
                    break
            unmasked.append(item)
            if len(unmasked) > QUERIES_AHEAD:
                self._drop_planned(unmasked)  # held for nothing once planned
        self._put(self.query_q, _END)
        while not self.stop.is_set() and self._mask_ahead(unmasked):
            pass

    def _offer(self, q, item) -> bool:
        """Put `item` on `q` unless it is full."""
        if self.stop.is_set():
            raise _Stop
        try:
            q.put_nowait(item)
            return True
        except queue.Full:
            return False

    def _mask_ahead(self, unmasked: collections.deque) -> bool:
        """Find the masks of the first MASK_AHEAD_LETTERS or so of the queries handed on
        and not planned yet (dropped from `unmasked`, as are those planned meanwhile), kept
        for the planner unless it plans them meanwhile. Returns whether there were any."""
        from ..query import query_masks

        self._drop_planned(unmasked)
        handed, letters = [], 0
        while unmasked and letters < MASK_AHEAD_LETTERS:
            handed.append(unmasked.popleft())
            letters += len(handed[-1][1])
        if not handed:
            return False
        masks = query_masks([query for _, query in handed], self.options)
        with self.masks_lock:
            for (number, _), mask in zip(handed, masks):
                if number > self.planned_through:
                    self.masks_ahead[number] = mask
        return True

    def _drop_planned(self, unmasked: collections.deque) -> None:
        with self.masks_lock:
            while unmasked and unmasked[0][0] <= self.planned_through:
                unmasked.popleft()

    def _masks_found(self, items: list) -> list:
        """The masks the reader found for a batch's (number, query) items (None where not)."""
        with self.masks_lock:
            self.planned_through = items[-1][0]
            return [self.masks_ahead.pop(number, None) for number, _ in items]

    def _planner(self):
        """Forms blastn's batches (each sized by the extensions the one before kept), plans
        each and posts its jobs. The second batch is planned beside the first one's search,
        at the size it takes unless the first keeps next to no extensions or very many
        (engine.ForecastBatches' guess): its table then waits for no count, where it held
        up the search of the second batch; a guess the count proves wrong is dropped and
        the batch planned again."""
        from ..engine import ForecastBatches
        from ..pools import beside

        def queries():
            while (item := self._get(self.query_q)) is not _END:
                yield item

        if self.given is not None:
            batches = self.given.reading(queries())
        else:
            batches = ForecastBatches(queries(), self.search.batch_sizes(),
                                      size=lambda item: len(item[1]), guess_second=True)
        batch_id, guessed = 0, None
        while True:
            plan = None if guessed is None else guessed.result()
            if plan is None:
                formed = batches.next_batch()
                if formed is None:
                    break
                plan = self._plan(formed[1])
            if self.given is not None:
                self.given.wait_turn(self.stop)
            guess_formed = Future() if batch_id == 0 and self.given is None else None
            guessed = None if guess_formed is None else \
                beside(self._guessed_plan, batches, guess_formed)
            self._post(batch_id, plan)
            extensions = self.batch_sizes.total(batch_id)
            if guess_formed is not None:
                guess_formed.result()  # its queries are read before the count is told
            if batches.counted(extensions):
                guessed = None
            batch_id += 1
        for _ in range(self.prelim_threads):
            self._put(self.job_q, _END)

    def _guessed_plan(self, batches, formed: Future):
        """The second batch formed as ForecastBatches guesses it (`formed` is told it, or
        None when no query is left) and its plan. Its queries are read here, beside the
        first batch's jobs: a second batch of short reads may be tens of thousands of them."""
        try:
            guess = batches.next_batch()
        except BaseException as exc:
            formed.set_exception(exc)
            raise
        formed.set_result(guess)
        return None if guess is None else self._plan(guess[1])

    def _plan(self, items: list):
        """The plan of a batch of (number, query) items."""
        from ..query import mark_unsearched_batch

        return self.search.plan(mark_unsearched_batch([q for _, q in items]), items[0][0],
                                self.pool,
                                self._masks_found(items))

    def _post(self, batch_id: int, plan) -> None:
        """The batch's plan to the collector, and its jobs to the prelim workers."""
        from ..engine import ungapped_in_database_order

        engine = self._make_jobs() if plan.table is not None else None
        self.batch_sizes.expect(batch_id, len(self.jobs) if plan.table is not None else 0)
        self._put(self.prelim_q, ("batch", batch_id, plan))
        if plan.table is None:
            return
        turns = _Turnstile(self.stop) if ungapped_in_database_order(plan.table) else None
        scan_turns = _Turnstile(self.stop)
        shared = SharedScans() if self.whole_volumes else None
        for number, (volume, subjects) in enumerate(self.jobs):
            self._put(self.job_q, _Job(batch_id, plan, engine, volume, subjects, shared,
                                       turns, scan_turns, number))

    def _make_jobs(self):
        """The jobs, once the backend is ready (the workers wait for it anyway). A backend
        that scans whole volumes gets one job per volume, whose gapped stage and traceback
        searches spread over the threads: with several per volume, each job would cut its
        gapped work into as many tasks as a whole volume's, each task with its own Python
        (docs/perf/pipeline.md). A CPU scan gets many jobs, so that its threads end
        together. Returns the search's Engine."""
        from ..engine import volume_jobs

        engine = self.search.engine()
        if self.jobs is not None:
            return engine
        self.whole_volumes = engine.backend_plan.scans_whole_volumes
        if self.prelim_threads <= 1:
            parts = 1
        elif self.whole_volumes:
            parts = WHOLE_VOLUME_JOBS
        else:
            parts = CPU_JOBS_PER_THREAD * self.prelim_threads
        self.jobs = volume_jobs(self.db, parts)
        for volume, _ in self.jobs:
            self.volume_rank.setdefault(volume, len(self.volume_rank))
        return engine

    def _prelim_worker(self):
        while (job := self._get(self.job_q)) is not _END:
            shared, turns = job.shared, job.turns
            rank = self.volume_rank[job.volume]
            # the diagonal hash's order: the jobs', or the volumes' when each volume is
            # scanned and extended whole (by the first of its jobs to come); whole volumes
            # are scanned in order too (scans at once would hold back the first volume's
            # extension, which must come first)
            turn = None if turns is None else turns.turn(rank if shared else job.number)
            # a whole volume's seeds are extended by one job while the others wait for them:
            # it may spread the diagonal hash's stretches over the threads (extend_seeds); the
            # job's traceback searches are made on the GPU here, not in the one collector
            hits = job.engine.prelim_search(
                job.plan, job.volume, self.pool,
                ungapped_done=lambda extensions, batch=job.batch_id:
                    self.batch_sizes.count(batch, extensions),
                threads=self.options.num_threads if shared else 1, subjects=job.subjects,
                once_per_volume=shared.once if shared else None, ungapped_turn=turn,
                scan_turn=job.scan_turns.turn(rank) if shared else None,
                ungapped_threads=None if shared else self.options.num_threads)
            self._put(self.prelim_q, ("volume", job.batch_id, hits))
        self._put(self.prelim_q, _END)

    def _collector(self):
        """Merge each batch's volumes into traceback tasks (the most work first; the writer
        restores the input order), and close each query's join once its batch is complete.
        When no hit-list limit can drop a subject (the database has no more sequences than
        a query's preliminary hit list holds), a job's subjects go to traceback as soon as
        the job ends, so traceback overlaps the batch's other jobs."""
        from ..engine import PrelimHits, prelim_hitlist_size
        from ..hspfilters import has_query_filter

        # culling and the best-hit filter see each query's subjects all together
        stream = self.db.num_seqs <= prelim_hitlist_size(self.options) and \
            not has_query_filter(self.options)
        pending, merged, joins = {}, {}, {}
        next_batch, ended = 0, 0
        while ended < self.prelim_threads:
            item = self._get(self.prelim_q)
            if item is _END:
                ended += 1
                continue
            kind, batch_id, payload = item
            if kind == "batch":
                pending[batch_id] = len(self.jobs) if payload.table is not None else 0
                merged[batch_id] = PrelimHits()
                joins[batch_id] = [_QueryJoin(payload, q) for q in range(len(payload.queries))]
            elif stream:
                plan = joins[batch_id][0].plan
                self._post_tasks(batch_id, joins[batch_id],
                                 self.search.engine().trace_tasks(payload, plan), len(self.jobs))
                pending[batch_id] -= 1
            else:
                merged[batch_id].merge(payload)
                pending[batch_id] -= 1
            if kind != "batch" and pending[batch_id] == 0:
                joins[batch_id][0].plan.table.drop_words()  # every volume is scanned
            # close complete batches in order, so results flow in input order
            while next_batch in pending and pending[next_batch] == 0:
                del pending[next_batch]
                batch_joins, hits = joins.pop(next_batch), merged.pop(next_batch)
                if hits.by_query:
                    self._post_tasks(next_batch, batch_joins,
                                     self.search.engine().trace_tasks(hits, batch_joins[0].plan))
                complete = []
                for join in batch_joins:
                    with self.lock:
                        join.sealed = True
                        if join.remaining == 0:
                            complete.append(join)
                if complete:
                    self._finish(complete)
                next_batch += 1
        # every job has ended, and with them the searches on the GPU
        if self.settings.release_device:
            self.search.retire_device()
        # every traceback task done (the backlog whole again): the results are all out
        for _ in range(TRACE_BACKLOG * self.traceback_threads):
            self._acquire(self.backlog)
        self._put(self.result_q, _END)

    def _post_tasks(self, batch_id: int, joins: list, tasks: list, jobs: int = 1) -> None:
        """Traceback tasks to the CPU pool, in groups (Engine.trace_groups): earlier batches
        first, then the most work. `jobs`: how many parts of the batch's tasks come this way
        (one per job when they go as each job ends), which share the batch's groups: cut for
        each job as for a whole batch, groups would hold a few tasks each, and their calls
        cost more than fewer, fuller groups."""
        from ..engine import GROUPS_PER_THREAD

        groups = max(1, GROUPS_PER_THREAD * self.traceback_threads // jobs)
        for group in self.search.engine().trace_groups(tasks, groups):
            self._acquire(self.backlog)
            with self.lock:
                for task in group.tasks:
                    joins[task.query_index].remaining += 1
            first = 0 if self.given is None else self.given.number
            self.pool.submit((1, first + batch_id, -group.work), self._trace_group, joins,
                             group)

    def _acquire(self, semaphore) -> None:
        while not semaphore.acquire(timeout=POLL_SECONDS):
            if self.stop.is_set():
                raise _Stop

    def _finish(self, joins: list) -> None:
        """Assemble and format the results of queries whose subjects are all traced (their
        lines written together)."""
        from ..engine import query_results

        queries = [join.plan.queries[join.q] for join in joins]
        results = query_results([(join.plan.first_index + join.q, query, join.traced)
                                 for join, query in zip(joins, queries)], self.options)
        pairs = list(zip(queries, results))
        for (_, result), text in zip(pairs, self.render(pairs)):
            self._put(self.result_q, (result.query_index, text))

    def _trace_group(self, joins: list, group) -> None:
        """Trace a group of (query, subject) tasks on the CPU pool; the group that traces
        the last subject of a query whose batch is complete assembles and formats that
        query's result. A failure stops the run, as in the stage threads."""
        try:
            with self._failure_stops_the_run():
                if self.stop.is_set():
                    return
                plan = joins[group.tasks[0].query_index].plan
                pairs = self.search.engine().trace_group(group, plan)
                complete = []
                with self.lock:
                    for task, pair in zip(group.tasks, pairs):
                        join = joins[task.query_index]
                        join.traced.append(pair)
                        join.remaining -= 1
                        if join.sealed and join.remaining == 0:
                            complete.append(join)
                if complete:
                    self._finish(complete)
        finally:
            self.backlog.release()

    # -- the writer side -------------------------------------------------------------------

    def texts(self):
        """Each query's output text, in input order, produced by the stage threads."""
        from ..pools import PriorityPool

        # the reader first: the first batch is planned once all its queries are read, and
        # starting the pool's threads first would hold the reading back
        threads = [self._run("reader", self._reader)]
        waiting = {}
        try:
            self.pool = self.shared_pool or PriorityPool(self.traceback_threads)
            threads += [self._run("planner", self._planner),
                        self._run("collector", self._collector)]
            threads += [self._run(f"prelim{i}", self._prelim_worker)
                        for i in range(self.prelim_threads)]
            while (item := self._get_result()) is not _END:
                number, text = item
                waiting[number] = text
                # every query before this one in the input was read before it
                while self.read_order and self.read_order[0] in waiting:
                    yield waiting.pop(self.read_order.popleft())
        finally:
            self.stop.set()
            self._join(threads)
            if self.pool is not None and self.pool is not self.shared_pool:
                self.pool.close()
        self._raise_error()

    @staticmethod
    def _join(threads, seconds: float = 0.5):
        """Give the stages a moment to notice the stop flag. A thread inside a long numba call
        cannot be interrupted; it is a daemon, so it never keeps the process alive."""
        deadline = time.monotonic() + seconds
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def cancel(self) -> None:
        """Stop every stage from another thread: texts() raises CancelledError."""
        from concurrent.futures import CancelledError

        with self.lock:
            self.errors.append(CancelledError("the batch was cancelled"))
        self.stop.set()

    def _get_result(self):
        while True:
            self._raise_error()
            try:
                return self.result_q.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue

    def _raise_error(self):
        if self.errors:
            raise self.errors[0]


class GivenBatch:
    """The queries of a Pipeline as one batch, formed by its caller as blastn would (a
    cluster worker's replicated batch, drivers/resident.py), in place of ForecastBatches:
    the planner takes them whole, and the batch's count of ungapped extensions, which
    sizes the batch after it, is set on `extensions` as soon as every job has counted.
    `after`, the count of a batch searched before it beside it: its jobs wait for that,
    once it is planned, as the pipeline's own next batch waits for this one's. `number`,
    the batch's place in its search: its traceback tasks go after those of the batches
    before it in a pool the runs share."""

    def __init__(self, first_index: int, after: Future | None = None, number: int = 0):
        self.first_index = first_index  # the search's number of the batch's first query
        self.after = after
        self.number = number
        self.extensions = Future()
        self.items = None

    def wait_turn(self, stop: threading.Event) -> None:
        """Wait for the batch before (told, or failed) unless the run stops."""
        from concurrent.futures import wait

        while self.after is not None and not wait([self.after], POLL_SECONDS).done:
            if stop.is_set():
                raise _Stop

    def reading(self, items) -> "GivenBatch":
        self.items = items
        return self

    def next_batch(self) -> tuple | None:
        if self.items is None:
            return None
        items, self.items = list(self.items), None
        return (self.first_index, items) if items else None

    def counted(self, extensions: int) -> int:
        self.extensions.set_result(extensions)
        return 0


class _ExtensionCounts:
    """Each batch's ungapped extensions, between the prelim workers, which count each job's,
    and the planner, which sizes the next batch from a batch's total once all its jobs have
    counted."""

    def __init__(self, stop: threading.Event):
        self.stop = stop
        self.waiting: dict = {}  # batch id -> [jobs yet to count, extensions so far]
        self.totals: dict = {}   # batch id -> its extensions, once every job counted
        self.changed = threading.Condition()

    def total(self, batch_id: int) -> int:
        """The batch's extensions, once every job of it has counted."""
        with self.changed:
            while batch_id not in self.totals:
                if self.stop.is_set():
                    raise _Stop
                self.changed.wait(POLL_SECONDS)
            return self.totals.pop(batch_id)

    def expect(self, batch_id: int, jobs: int) -> None:
        with self.changed:
            self.waiting[batch_id] = [jobs, 0]
            if not jobs:
                self._report(batch_id)

    def count(self, batch_id: int, extensions: int) -> None:
        with self.changed:
            left = self.waiting[batch_id]
            left[0] -= 1
            left[1] += extensions
            if not left[0]:
                self._report(batch_id)

    def _report(self, batch_id: int) -> None:
        with self.changed:
            self.totals[batch_id] = self.waiting.pop(batch_id)[1]
            self.changed.notify_all()


@dataclass
class _QueryJoin:
    """A query's traced subjects, gathered from the traceback threads."""

    plan: object
    q: int                 # within the batch
    remaining: int = 0     # tasks posted and not traced yet
    sealed: bool = False   # every task of the query is posted (its batch is complete)
    traced: list = field(default_factory=list)


class _Turnstile:
    """Lets the jobs of one batch through a section one at a time, in job order (the diagonal
    hash must see the database in order); the jobs' other stages still overlap."""

    def __init__(self, stop: threading.Event):
        self.stop = stop
        self.next = 0
        self.changed = threading.Condition()

    @contextmanager
    def turn(self, number: int):
        with self.changed:
            while self.next != number:
                if self.stop.is_set():
                    raise _Stop
                self.changed.wait(POLL_SECONDS)
        try:
            yield
        finally:
            with self.changed:
                self.next = number + 1
                self.changed.notify_all()


@dataclass
class _Job:
    """One (batch, part of a volume) preliminary search, as the planner posts it."""

    batch_id: int
    plan: object           # engine.BatchPlan
    engine: object         # engine.Engine
    volume: object
    subjects: range
    shared: "SharedScans | None"  # the batch's, when the backend scans whole volumes
    turns: "_Turnstile | None"   # the ungapped stage's, when it goes in database order
    scan_turns: "_Turnstile"
    number: int            # the job's place in the batch


class SharedScans:
    """What a batch's jobs of one volume share when the backend scans whole volumes
    (Engine.initial_hits' once_per_volume): each thing made once per volume, by the first
    job that asks, the others waiting for it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.volumes: dict = {}   # volume -> (lock, {what: made})

    def once(self, volume, what: str, make):
        with self.lock:
            lock, held = self.volumes.setdefault(volume, (threading.Lock(), {}))
        with lock:
            if what not in held:
                held[what] = make()
            return held[what]
