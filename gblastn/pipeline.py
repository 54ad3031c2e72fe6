"""The search driver: queries in, tabular output out, written atomically.

Two drivers give byte-identical output:

* **serial** runs the engine batch by batch in the calling thread;
* **pipeline** (the default) overlaps the stages in threads joined by four bounded queues, as
  G-BLASTN's pipeline mode did:

      reader ──query queue──► planner ──job queue──► prelim workers ──prelim queue──►
      collector ─(traceback tasks)─► CPU pool ──result queue──► writer (this thread)

  The reader streams queries from the files; the planner groups them into BLAST's batches and
  builds each batch's masks, statistics and lookup table, then posts one job per (batch, part
  of a volume); prelim workers scan (CPU or GPU backend), run the ungapped stage and hand the
  score-only gapped extensions, in pieces, to the CPU pool; the collector waits until every
  volume of a batch is in and posts the traceback tasks, one per (query, subject), in groups
  of one compiled call each, to the same pool. The pool's threads take gapped pieces before
  traceback groups (the next tracebacks wait for them), and groups the most work first; the
  thread that traces a query's last subject formats its output; the writer prints results in
  input order. Queue depths bound what is in flight, so a list of 100,000 queries is never
  held in memory at once. The numba stages release the GIL, so the workers run in parallel.

A failure in any thread stops every stage: the first error is re-raised here, and the output
files are removed (they are only renamed into place when the whole search succeeded:
output.files).
"""

import os
import queue
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable
from dataclasses import dataclass, field, replace

from .errors import InputError, OptionsError
from .timing import TIMES

POLL_SECONDS = 0.1  # how often a blocked thread looks at the stop flag
TRACE_BACKLOG = 8  # traceback groups waiting per CPU thread, at most
RENDER_RUNS_PER_THREAD = 2  # runs of a batch's queries per thread the serial driver formats
WHOLE_VOLUME_JOBS = 1  # jobs per volume when the backend scans whole volumes


@dataclass
class OutputSpec:
    outfmt: str = "0"
    out: str | None = None        # None or '-': standard output
    out_dir: str | None = None    # one output per listed query file
    db_name: str = ""             # as the user gave it, for '# Database:'
    # -outfmt 0's settings (None: blastn's default)
    line_length: int | None = None
    num_descriptions: int | None = None
    num_alignments: int | None = None
    show_gis: bool | None = None


@dataclass
class RunSettings:
    mode: str = "pipeline"        # or "serial"
    prelim_threads: int = 0       # 0: derived from options.num_threads
    traceback_threads: int = 0
    progress: bool = False
    stage_times: bool = False     # print where the time went, on stderr
    # the process ends with the search: the GPU is given back as soon as the search is done
    # with it (GpuBackend.retire), while the CPU finishes the tracebacks and the output
    release_device: bool = False
    # called once the outputs and the database are ready, before the first query is read:
    # a first search compiles its stages there (compile_ahead), before its progress bar
    compile_stages: Callable[[], None] | None = None


def query_files(query: str | None, query_list: str | None) -> list:
    """The FASTA files to search, from -query or -query_list (standard input without
    either, as blastn reads it), each checked to be a readable file before the search."""
    from .query import check_query_file, read_query_list

    if query is not None and query_list is not None:
        raise InputError("give one of -query and -query_list, not both")
    if query_list is not None:
        return read_query_list(query_list)
    query = "-" if query is None else query
    if query != "-":
        check_query_file(query)
    return [query]


def run_search(files: list, db_path: str, options, output: OutputSpec, backend=None,
               settings: RunSettings | None = None) -> int:
    """Search every query of `files`; one output, or one per file with out_dir. Returns the
    number of queries searched. Every output is checked and prepared before the database
    is opened, and put in place only when the whole search succeeded (output.files)."""
    from .db.reader import open_db
    from .output.files import OutputFiles, prepare_output_folder
    from .output.formats import output_format

    settings = settings or RunSettings()
    fmt = output_format(output.outfmt, options, output.db_name,
                        line_length=output.line_length,
                        num_descriptions=output.num_descriptions,
                        num_alignments=output.num_alignments, show_gis=output.show_gis)
    if backend is None:
        from .scan import cpu as backend
    paths = output_paths(output, files)
    made_folders = prepare_output_folder(output.out_dir) if output.out_dir else []
    with OutputFiles(paths, made_folders) as outputs:
        with TIMES.stage("database load"):
            db = open_db(db_path)
        with db:
            if settings.compile_stages is not None:
                settings.compile_stages()
            loader = _preload(db, backend)
            try:
                return _search_all(files, db, fmt, options, output, backend, settings, outputs)
            finally:
                loader.join()  # the volume's memory must outlive the copy


def output_paths(output: OutputSpec, files: list) -> list:
    """Where the search writes: [output.out], or with out_dir one file per query file, named
    after it (q.fa gives q.out). Two query files that would give the same name are refused,
    naming both: one's results would replace the other's."""
    if output.out_dir is None:
        return [output.out]
    if output.out not in (None, "-"):
        raise OptionsError("give one of -out and -out_dir, not both")
    claimed = {}
    for path in files:
        name = os.path.splitext(os.path.basename(path))[0] + ".out"
        if name in claimed:
            raise InputError(f"{claimed[name]} and {path} would both be written to "
                             f"{os.path.join(output.out_dir, name)}: rename one of them")
        claimed[name] = path
    return [os.path.join(output.out_dir, name) for name in claimed]


def _search_all(files, db, fmt, options, output, backend, settings, outputs) -> int:
    if settings.stage_times:
        TIMES.report_wanted = True  # the command line prints it on leaving
    if not output.out_dir:
        return _search_into(outputs, 0, fmt, files, db, options, output, backend, settings)
    total = 0
    for number, path in enumerate(files):
        last = number == len(files) - 1
        these = replace(settings, release_device=settings.release_device and last)
        total += _search_into(outputs, number, fmt, [path], db, options, output, backend, these)
    return total


def _preload(db, backend) -> threading.Thread:
    """Load the volumes in a thread, while the first batch's queries are read, masked and
    indexed, and copy each to the GPU as the next one loads, as many as fit there together
    (a volume loaded only when its first job came would hold up that job's scan). Without a
    GPU only the first volume is loaded ahead. `backend` may still be a Future. A failure
    here is left for the search to meet (and report) when it reaches the volume."""
    def body():
        with ThreadPoolExecutor(1, thread_name_prefix="gblastn-preload-copy") as copier:
            copied = None
            try:
                for volume in db.volumes:
                    with TIMES.stage("database load"):
                        buffer, _ = volume.concat_packed()
                    ready = _ready(backend)
                    if not hasattr(ready, "preload") or \
                            (copied is not None and not copied.result()):
                        return
                    copied = copier.submit(ready.preload, buffer)
                if copied is not None:
                    copied.result()
            except Exception:  # noqa: BLE001 - see the docstring
                pass

    thread = threading.Thread(target=body, name="gblastn-preload", daemon=True)
    thread.start()
    return thread


def _search_into(outputs, index, fmt, files, db, options, output, backend, settings) -> int:
    """Search the queries of `files` into output `index` of `outputs` (an OutputFiles)."""
    def render(pairs):
        with TIMES.stage("output"):
            return fmt.render(pairs, db)

    if settings.mode == "serial":
        texts = _serial_texts(files, db, options, backend, render, settings.release_device)
    else:
        texts = Pipeline(files, db, options, backend, settings, render).texts()
    progress = _Progress(files) if settings.progress else None
    out = outputs.open(index)
    count = 0
    try:
        for text in texts:
            with TIMES.stage("output"):
                out.write(text)
            count += 1
            if progress:
                progress.advance()
    finally:
        if progress:
            progress.close()
    out.write(fmt.footer(db, count))
    _ready(backend)  # -device gpu without a GPU fails even when nothing needed a scan
    outputs.close(index)
    return count


# blastn's words, to the trailing space, for a record without letters
EMPTY_QUERY_WARNING = "Warning: [blastn] {label}: Sequence contains no data "


def _iter_all_queries(files):
    """The queries of `files`, numbered across them as blastn numbers its input. A record
    without letters is warned about in blastn's words and searched (it has no hits); when
    no record has letters blastn fails, and so does this: empty records are held back until
    a query with letters comes, so that nothing of theirs is written first."""
    from .query import iter_queries

    held, number, any_letters = [], 0, False
    for path in files:
        count = 0
        for query in iter_queries(path, first_number=number + 1):
            number += 1
            count += 1
            if len(query) == 0:
                label = " ".join(filter(None, (f"Query_{number}", query.defline)))
                print(EMPTY_QUERY_WARNING.format(label=label), file=sys.stderr)
                if not any_letters:
                    held.append(query)
                    continue
            elif not any_letters:
                any_letters = True
                yield from held
                held = []
            yield query
        if count == 0:
            print(f"gblastn: warning: {path} holds no query sequence", file=sys.stderr)
    if held:
        raise InputError(f"Sequence contains no data: no query of {', '.join(files)} has letters")


def _serial_texts(files, db, options, backend, render, release_device=False):
    """Each query's output text from the engine, batch by batch; a batch's queries are
    formatted on the pool, in runs of about equal numbers of lines (a run's lines are
    written by one compiled call without the GIL). Each batch's successor is read before
    it is searched, so that the last one is known: with release_device, the device goes
    back once that one's traceback searches are made."""
    from .engine import query_batches, search_batch
    from .pools import TaskPool

    index = 0
    with TaskPool(options.num_threads) as pool:
        batches = query_batches(_iter_all_queries(files), options)
        batch = next(batches, None)
        while batch is not None:
            following = next(batches, None)
            last = release_device and following is None
            results = search_batch(batch, index, db, options, backend, pool,
                                   device_done=(lambda: _retire(backend)) if last else None)
            runs = _runs_of_lines(list(zip(batch, results)), RENDER_RUNS_PER_THREAD * pool.threads)
            for texts in pool.map(render, runs):
                yield from texts
            index += len(batch)
            batch = following


def _runs_of_lines(pairs: list, runs: int) -> list:
    """(query, result) pairs cut, in order, into about `runs` runs of about equal numbers of
    output lines. Formatted one call per query, a batch's queries would each take the GIL
    in Python on their way to the compiled writer, the last step of a serial search."""
    from .pools import runs_of

    lines = [sum(len(subject.hsps) for subject in result.subjects) + 1 for _, result in pairs]
    return runs_of(pairs, lines, sum(lines) / max(1, runs))


def _retire(backend) -> None:
    """Give the device back for good (GpuBackend.retire): release_device says the process
    ends with the search. Nothing for the CPU backend."""
    retire = getattr(_ready(backend), "retire", None)
    if retire is not None:
        retire(for_good=True)


def _ready(backend):
    """The scan backend; a Future (the GPU's set-up) is waited for here, at the first scan,
    so that the queries are read, masked and indexed meanwhile."""
    return backend.result() if isinstance(backend, Future) else backend


# ---------------------------------------------------------------------------------------------
# the threaded pipeline


class _Stop(Exception):
    """Raised inside a stage when another stage failed or the run was interrupted."""


_END = object()  # end-of-stream marker on a queue


class Pipeline:
    """The four-queue search pipeline over one database (see the module docstring)."""

    def __init__(self, files, db, options, backend, settings: RunSettings, render):
        threads = options.num_threads
        self.files, self.db, self.options, self.backend = files, db, options, backend
        self.settings = settings
        self.render = render  # [(query, result), ...] -> the queries' output texts
        # Within one batch the stages run one after the other (traceback needs every volume's
        # preliminary hits), so each stage may use all the threads; they only overlap
        # between batches, where the slight oversubscription keeps every core busy.
        self.prelim_threads = settings.prelim_threads or threads
        self.traceback_threads = settings.traceback_threads or threads
        depth = max(2, 2 * threads)
        self.query_q = queue.Queue(maxsize=256)
        self.job_q = queue.Queue(maxsize=depth)
        self.prelim_q = queue.Queue(maxsize=depth)
        self.result_q = queue.Queue(maxsize=4 * depth)
        # traceback tasks posted and not done: a bound on the preliminary hits held
        self.backlog = threading.BoundedSemaphore(TRACE_BACKLOG * self.traceback_threads)
        self.jobs = None  # (volume, subject range) pieces, made once the backend is known
        self.volume_rank: dict = {}  # id(volume) -> its place among the jobs' volumes
        self.pool = None  # the CPU pool (gapped pieces, traceback tasks), while texts() runs
        self.stop = threading.Event()
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
        for index, query in enumerate(_iter_all_queries(self.files)):
            self._put(self.query_q, (index, query))
        self._put(self.query_q, _END)

    def _planner(self):
        from .engine import plan_batch, query_batches

        def queries():
            while (item := self._get(self.query_q)) is not _END:
                yield item

        batch_id = 0
        for items in query_batches(queries(), self.options, size=lambda item: len(item[1])):
            first = items[0][0]
            plan = plan_batch([q for _, q in items], first, self.db, self.options, self.pool)
            if plan.table is not None:
                self._make_jobs()
            self._put(self.prelim_q, ("batch", batch_id, plan))
            if plan.table is not None:
                # imported here, not first thing: its module imports numba, whose import
                # (in the GPU's set-up thread) would hold the first batch's masks and table
                # back until it was done
                from .ungapped import uses_diag_hash

                turns = _Turnstile(self.stop) if uses_diag_hash(plan.table) else None
                scan_turns = _Turnstile(self.stop)
                for number, job in enumerate(self.jobs):
                    self._put(self.job_q, (batch_id, plan) + job + (turns, scan_turns, number))
            batch_id += 1
        for _ in range(self.prelim_threads):
            self._put(self.job_q, _END)

    def _make_jobs(self) -> None:
        """The jobs, once the backend is ready (the workers wait for it anyway). A backend
        that scans whole volumes gets one job per volume, whose gapped stage and traceback
        searches spread over the threads: with several per volume, each job would cut its
        gapped work into as many tasks as a whole volume's, each task with its own Python
        (docs/perf/pipeline.md). A CPU scan gets many jobs, so that its threads end
        together."""
        if self.jobs is not None:
            return
        self.backend = _ready(self.backend)
        if self.prelim_threads <= 1:
            parts = 1
        elif getattr(self.backend, "scans_whole_volumes", False):
            parts = WHOLE_VOLUME_JOBS
        else:
            parts = 4 * self.prelim_threads
        self.jobs = volume_jobs(self.db, parts)
        for volume, _ in self.jobs:
            self.volume_rank.setdefault(id(volume), len(self.volume_rank))

    def _prelim_worker(self):
        from .engine import PrelimHits, prelim_search_volume, tails_ahead

        while (job := self._get(self.job_q)) is not _END:
            batch_id, plan, volume, subjects, turns, scan_turns, number = job
            self.backend = _ready(self.backend)
            shared = self.shared_scans(plan)
            rank = self.volume_rank[id(volume)]
            # the diagonal hash's order: the jobs', or the volumes' when each volume is
            # scanned and extended whole (by the first of its jobs to come); whole volumes
            # are scanned in order too (scans at once would hold back the first volume's
            # extension, which must come first)
            turn = None if turns is None else turns.turn(rank if shared else number)
            # a whole volume's seeds are extended by one job while the others wait for them:
            # it may spread the diagonal hash's stretches over the threads (extend_seeds)
            threads = self.options.num_threads if shared else 1
            hits = PrelimHits()
            prelim_search_volume(plan.batch, plan.table, plan.stats, volume, self.options, hits,
                                 self.backend, num_threads=threads, subjects=subjects,
                                 diag_hash=plan.diag_hash, ungapped_turn=turn,
                                 pool=self.pool, shared_scans=shared,
                                 scan_turn=scan_turns.turn(rank) if shared else None)
            # the job's traceback searches, on the GPU, here rather than in the one collector
            tails_ahead(hits.by_query, plan.batch, plan.stats, self.db, self.backend,
                        self.options)
            self._put(self.prelim_q, ("volume", batch_id, hits))
        self._put(self.prelim_q, _END)

    def _collector(self):
        """Merge each batch's volumes into traceback tasks (the most work first; the writer
        restores the input order), and close each query's join once its batch is complete.
        When no hit-list limit can drop a subject (the database has no more sequences than
        a query's preliminary hit list holds), a job's subjects go to traceback as soon as
        the job ends, so traceback overlaps the batch's other jobs."""
        from .engine import prelim_hitlist_size, trace_tasks

        stream = self.db.num_seqs <= prelim_hitlist_size(self.options)
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
                merged[batch_id] = {}
                joins[batch_id] = [_QueryJoin(payload, q) for q in range(len(payload.queries))]
            elif stream:
                self._post_tasks(batch_id, joins[batch_id],
                                 trace_tasks(payload.by_query, self.options), len(self.jobs))
                pending[batch_id] -= 1
            else:
                for q, subjects in payload.by_query.items():
                    merged[batch_id].setdefault(q, {}).update(subjects)
                pending[batch_id] -= 1
            # close complete batches in order, so results flow in input order
            while next_batch in pending and pending[next_batch] == 0:
                del pending[next_batch]
                batch_joins, hits = joins.pop(next_batch), merged.pop(next_batch)
                if hits:
                    self._post_tasks(next_batch, batch_joins, trace_tasks(hits, self.options))
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
            _retire(self.backend)
        # every traceback task done (the backlog whole again): the results are all out
        for _ in range(TRACE_BACKLOG * self.traceback_threads):
            self._acquire(self.backlog)
        self._put(self.result_q, _END)

    def _post_tasks(self, batch_id: int, joins: list, tasks: list, jobs: int = 1) -> None:
        """Traceback tasks to the CPU pool, in groups (engine.trace_groups): earlier batches
        first, then the most work. `jobs`: how many parts of the batch's tasks come this way
        (one per job when they go as each job ends), which share the batch's groups: cut for
        each job as for a whole batch, groups would hold a few tasks each, and their calls
        cost more than fewer, fuller groups."""
        from .engine import GROUPS_PER_THREAD, trace_groups

        groups = max(1, GROUPS_PER_THREAD * self.traceback_threads // jobs)
        for group in trace_groups(tasks, self.db, groups):
            self._acquire(self.backlog)
            with self.lock:
                for task in group.tasks:
                    joins[task.query_index].remaining += 1
            self.pool.submit((1, batch_id, -group.work), self._trace_group, joins, group)

    def _acquire(self, semaphore) -> None:
        while not semaphore.acquire(timeout=POLL_SECONDS):
            if self.stop.is_set():
                raise _Stop

    def _finish(self, joins: list) -> None:
        """Assemble and format the results of queries whose subjects are all traced (their
        lines written together)."""
        from .engine import query_result

        pairs = []
        for join in joins:
            plan = join.plan
            query = plan.queries[join.q]
            pairs.append((query, query_result(plan.first_index + join.q, query, join.traced,
                                              self.options)))
        for (_, result), text in zip(pairs, self.render(pairs)):
            self._put(self.result_q, (result.query_index, text))

    def _trace_group(self, joins: list, group) -> None:
        """Trace a group of (query, subject) tasks on the CPU pool; the group that traces
        the last subject of a query whose batch is complete assembles and formats that
        query's result. A failure stops the run, as in the stage threads."""
        from .engine import trace_group

        try:
            with self._failure_stops_the_run():
                if self.stop.is_set():
                    return
                plan = joins[group.tasks[0].query_index].plan
                pairs = trace_group(group, plan.batch, plan.stats, self.db,
                                    self.options)
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

    def shared_scans(self, plan):
        """The batch's SharedScans when the backend scans whole volumes faster than parts."""
        return plan.scans if getattr(self.backend, "scans_whole_volumes", False) else None

    # -- the writer side -------------------------------------------------------------------

    def texts(self):
        """Each query's output text, in input order, produced by the stage threads."""
        from .pools import PriorityPool

        # the reader first: the first batch is planned once all its queries are read, and
        # starting the pool's threads first would hold the reading back
        threads = [self._run("reader", self._reader)]
        waiting, next_index = {}, 0
        try:
            self.pool = PriorityPool(self.traceback_threads)
            threads += [self._run("planner", self._planner),
                        self._run("collector", self._collector)]
            threads += [self._run(f"prelim{i}", self._prelim_worker)
                        for i in range(self.prelim_threads)]
            while (item := self._get_result()) is not _END:
                index, text = item
                waiting[index] = text
                while next_index in waiting:
                    yield waiting.pop(next_index)
                    next_index += 1
        finally:
            self.stop.set()
            self._join(threads)
            if self.pool is not None:
                self.pool.close()
        self._raise_error()

    @staticmethod
    def _join(threads, seconds: float = 0.5):
        """Give the stages a moment to notice the stop flag. A thread inside a long numba call
        cannot be interrupted; it is a daemon, so it never keeps the process alive."""
        import time
        deadline = time.monotonic() + seconds
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

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


def volume_jobs(db, parts_per_volume: int) -> list:
    """(volume, subject range) pieces of about equal letter counts; a subject is never split
    across jobs, since its chunks are merged in one place."""
    import numpy as np

    jobs = []
    for volume in db.volumes:
        lengths = np.asarray(volume.lengths, dtype=np.int64)
        if parts_per_volume <= 1 or lengths.size <= 1:
            jobs.append((volume, range(0, int(lengths.size))))
            continue
        ends = np.cumsum(lengths)
        targets = ends[-1] * np.arange(1, parts_per_volume) / parts_per_volume
        cuts = np.unique(np.concatenate([[0], np.searchsorted(ends, targets, side="left") + 1,
                                         [lengths.size]]))
        cuts = cuts[cuts <= lengths.size]
        jobs += [(volume, range(int(a), int(b))) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    return jobs


class _Progress:
    """Queries done of total, with rate and ETA, on stderr (only when it is a terminal)."""

    def __init__(self, files):
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeRemainingColumn)
        total = sum(_count_records(path) for path in files)
        self.progress = Progress(TextColumn("searching"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                                 console=Console(stderr=True), transient=True)
        self.progress.start()
        self.task = self.progress.add_task("search", total=total or None, rate="")

    def advance(self):
        self.progress.advance(self.task)
        speed = self.progress.tasks[0].speed
        if speed:
            self.progress.update(self.task, rate=f"{speed:.1f} queries/s")

    def close(self):
        self.progress.stop()


def _count_records(path) -> int:
    """Number of '>' lines of a FASTA file (0 for stdin): the progress bar's total."""
    if path == "-":
        return 0
    from .fasta import open_binary
    count, at_line_start = 0, True
    with open_binary(path) as handle:
        while chunk := handle.read(8 << 20):
            count += chunk.count(b"\n>") + (1 if at_line_start and chunk[:1] == b">" else 0)
            at_line_start = chunk.endswith(b"\n")
    return count
