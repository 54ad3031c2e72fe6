"""The serial driver: one batch after the other in the calling thread, each stage's
independent pieces (volumes' gapped pieces, traceback groups, output runs) on a pool."""

from ..engine import GROUPS_PER_THREAD, PrelimHits, empty_result, query_batches
from ..pools import INLINE, TaskPool, runs_of
from ..query import mark_unsearched_batch

RENDER_RUNS_PER_THREAD = 2  # runs of a batch's queries per thread the serial driver formats


def search_batch(search, queries: list, first_index: int, pool=INLINE,
                 device_done=None) -> tuple:
    """Search one batch of queries against every volume of `search` (a drivers.Search):
    (results in query order, the ungapped extensions kept, which size the next batch). The
    stages' independent pieces run on `pool`. The backend is waited for once the batch's
    queries are masked and indexed. `device_done`, when given, is called once the batch no
    longer needs the backend (before its tracebacks)."""
    plan, prelim = prelim_batch(search, queries, first_index, pool)
    if device_done is not None and plan.table is not None:
        device_done()
    return traced_results(search, plan, prelim, pool), prelim.extensions


def prelim_batch(search, queries: list, first_index: int, pool=INLINE) -> tuple:
    """The preliminary search of one batch against every volume: (its BatchPlan, its
    PrelimHits, whose extensions size the next batch)."""
    plan = search.plan(queries, first_index, pool)
    prelim = PrelimHits()
    if plan.table is None:
        return plan, prelim
    engine = search.engine()
    # each volume's gapped pieces run on the pool while the next volume is scanned and its
    # seeds extended here; the volumes' HSPs are filed in database order
    started = []
    for volume in engine.db.volumes:
        gapped = engine.initial_hits(plan, volume, pool)
        started.append((gapped, gapped.extend_later(pool)))
    # a volume's subjects are merged and filtered on the pool as soon as its pieces are done,
    # and their traceback searches made on the GPU while the next volumes' pieces run
    for gapped, results in started:
        volume_hits = PrelimHits(extensions=gapped.extensions())
        gapped.file_subjects(gapped.subject_hits(results(), pool)(), volume_hits)
        volume_hits.tails = engine.tails_ahead(volume_hits.by_query, plan)
        prelim.merge(volume_hits)
    return plan, prelim


def traced_results(search, plan, prelim, pool=INLINE) -> list:
    """The results of a batch's preliminary search (prelim_batch), in query order: its
    subjects traced on `pool`."""
    queries, first_index = plan.queries, plan.first_index
    if plan.table is None:
        return [empty_result(first_index + i, q) for i, q in enumerate(queries)]
    engine = search.engine()
    traced = [[] for _ in queries]
    groups = engine.trace_groups(engine.trace_tasks(prelim, plan),
                                 GROUPS_PER_THREAD * pool.threads)
    for group, pairs in zip(groups, pool.map(lambda group: engine.trace_group(group, plan),
                                             groups)):
        for task, pair in zip(group.tasks, pairs):
            traced[task.query_index].append(pair)
    return engine.query_results(plan, traced)


def search_results(search, queries, pool):
    """Each query with its QueryResult, in input order, batch by batch on `pool`; `queries`
    may be any iterable, read a batch at a time."""
    sizes = search.batch_sizes()
    index = 0
    for batch in map(mark_unsearched_batch, query_batches(queries, lambda: sizes.letters)):
        results, extensions = search_batch(search, batch, index, pool)
        sizes.searched(extensions)
        yield from zip(batch, results)
        index += len(batch)


def serial_texts(search, queries, render, release_device: bool = False):
    """Each query's output text, batch by batch; a batch's queries are formatted on the pool,
    in runs of about equal numbers of lines (a run's lines are written by one compiled call
    without the GIL). The query after each batch is read before the batch is searched, so
    that the last batch is known: with release_device, the device goes back once that
    one's traceback searches are made."""
    sizes = search.batch_sizes()
    index = 0
    with TaskPool(search.options.num_threads) as pool:
        pending = Lookahead(queries)
        for batch in map(mark_unsearched_batch, query_batches(pending, lambda: sizes.letters)):
            last = release_device and pending.exhausted()
            results, extensions = search_batch(
                search, batch, index, pool, device_done=search.retire_device if last else None)
            sizes.searched(extensions)
            runs = runs_of_lines(list(zip(batch, results)), RENDER_RUNS_PER_THREAD * pool.threads)
            for texts in pool.map(render, runs):
                yield from texts
            index += len(batch)


class Lookahead:
    """An iterator that can tell whether anything follows, reading one item ahead to know.
    (The next batch's size is known only once this one is searched, so the batch after it
    cannot be read ahead.)"""

    def __init__(self, items):
        self.items = iter(items)
        self.ahead = []

    def __iter__(self):
        return self

    def __next__(self):
        return self.ahead.pop() if self.ahead else next(self.items)

    def exhausted(self) -> bool:
        if not self.ahead:
            try:
                self.ahead.append(next(self.items))
            except StopIteration:
                return True
        return False


def runs_of_lines(pairs: list, runs: int) -> list:
    """(query, result) pairs cut, in order, into about `runs` runs of about equal numbers of
    output lines. Formatted one call per query, a batch's queries would each take the GIL
    in Python on their way to the compiled writer, the last step of a serial search."""
    lines = [sum(len(subject.hsps) for subject in result.subjects) + 1 for _, result in pairs]
    return runs_of(pairs, lines, sum(lines) / max(1, runs))
