"""The Python API's search (gblastn.search, gblastn.search_iter): the pipeline driver, as
the command line's search, on options.num_threads threads, each query's result made into
the records of gblastn.results while the database is open."""

from contextlib import contextmanager

DEFAULT_COLUMNS = "std score sstrand qlen slen"
# task -> how many of numba's dispatchers the process had made when its search last wrote
# the task's machine-code bundle: a later search writes it again only where numba made more
_MADE_AT_WRITING: dict = {}


def searched_records(queries, db, options, record, backend=None, times=None):
    """Yield record(query, gblastn.hsp.QueryResult) for each query, in input order, each
    made on the pipeline's threads as its query's subjects are all traced. `backend`: a scan
    Backend (the CPU's when None); `times`: a StageTimes to count the search's time in."""
    from concurrent.futures import Future

    from ..compile_ahead import after_search
    from ..numba_start import MADE
    from ..scan.backend import CPU
    from ..timing import StageTimes
    from . import Search
    from .pipeline import Pipeline
    from .run import RunSettings

    backend = backend or CPU
    set_up = Future()
    set_up.set_result(backend)
    if backend is CPU:
        _cpu_stages_ready(options.task, set_up)
    search = Search(db, options, times or StageTimes(), backend)
    yield from Pipeline(search, queries, RunSettings(),
                        lambda pairs: [record(query, result) for query, result in pairs]).texts()
    if backend is CPU and _MADE_AT_WRITING.get(options.task) != len(MADE):
        # what numba loaded beside the bundle (stages it lacked) goes into it, once
        _MADE_AT_WRITING[options.task] = len(MADE)
        after_search(options.task, "cpu", set_up)


def _cpu_stages_ready(task: str, set_up) -> None:
    """The task's CPU stages as the command line's search gets them: compiled first where
    this cache does not hold them, saying so on stderr (compile_ahead); else, in a process's
    first search, called from the task's machine-code bundle without numba's import."""
    from ..compile_ahead import compile_task, is_compiled, load_first_bundle

    if not is_compiled(task, "cpu"):
        compile_task(task, "cpu", set_up)
    else:
        load_first_bundle(task, "cpu")


def search_iter(queries, db, columns: str = DEFAULT_COLUMNS, backend=None, scheduler=None,
                scheduler_file=None, local_workers: int = 0, shards: int = 0,
                cluster_mode: str = "auto", shard_assignment=None, **options):
    """Search `queries` against `db` and yield one gblastn.results.QueryResult per query, in
    input order, as each query's search ends: the input is read a bounded way ahead (two of
    blastn's batches at most, and a few hundred queries), whatever its length.

    queries: a FASTA path (str or os.PathLike), FASTA text, a Bio.SeqRecord.SeqRecord, or an
        iterable of these or of plain sequence strings (a list, a Bio.SeqIO.parse(...)); in
        an iterable a string is a sequence unless it starts with '>'.
    db: a gblastn or BLAST+ database's name, or a database open_db opened.
    columns: the tabular columns (blastn's -outfmt 6 keywords) each HSP's `fields` holds.
    backend: the scan's backend (the CPU's when None).
    scheduler, scheduler_file, local_workers, shards, cluster_mode: search on a Dask cluster
        instead of in this process, as `gblastn search` does with these flags (the results
        are the same): a scheduler's address, a scheduler file (gblastn serve's), or a local
        cluster of that many workers made for this search; the database split into
        `shards` (0: one per worker), or as `shard_assignment` gives (a shard number per
        ordinal, any split); cluster_mode shard, replicate or auto. `db` is then a
        database's name, which the workers open too.
    options: blastn's options, as keywords (defaults below, as blastn 2.12's)."""
    from ..options import make_options
    from ..output.tabular_format import TabularFormat
    from .cluster import ClusterSpec

    TabularFormat.parse("6 " + columns)  # an unknown column is refused before the search
    cluster = ClusterSpec(scheduler, scheduler_file, local_workers, shards, cluster_mode,
                          assignment=shard_assignment)
    cluster.check()
    return _results(queries, db, make_options(**options), columns, backend, cluster)


def _results(queries, db, settings, columns: str, backend, cluster):
    """search_iter's results; a generator apart, so that bad options are refused at the
    call, not at the first result."""
    from ..query import iter_source_queries, located_queries
    from ..results import query_result

    with _opened(db) as (database, name):
        def record(query, result):
            return query_result(query, result, database, name, settings.task, columns)

        with _searched(database, name, settings, backend, cluster, record) as searched:
            yield from searched(located_queries(iter_source_queries(queries),
                                                settings.query_loc))


@contextmanager
def _searched(database, name, settings, backend, cluster, record):
    """The search of a query iterable, each query's record(query, QueryResult) in input
    order: in this process, or on `cluster` when it names one."""
    from ..pools import rare_collections
    from .cluster import ClusterSearch, connected, requested, worker_db_name

    if not requested(cluster):
        with rare_collections():
            yield lambda queries: searched_records(queries, database, settings, record,
                                                   backend)
        return
    with connected(cluster, settings.num_threads) as client:
        search = ClusterSearch(client, cluster, database, worker_db_name(name), settings)
        yield lambda queries: (record(query, result)
                               for query, result in search.results(queries))


def search(queries, db, columns: str = DEFAULT_COLUMNS, backend=None, **options) -> list:
    """Search `queries` against `db`: a list of one gblastn.results.QueryResult per query,
    in input order. search_iter takes the same arguments and yields the same results one
    query at a time."""
    return list(search_iter(queries, db, columns, backend, **options))


@contextmanager
def _opened(db):
    """(the database, its name as reports give it): opened here from a name, and closed
    after, or as the caller opened it."""
    from ..db.reader import open_db

    if hasattr(db, "volumes"):
        yield db, getattr(db, "name", "")
        return
    database = open_db(db)
    try:
        yield database, str(db)
    finally:
        database.close()


def _with_option_defaults(function) -> None:
    from ..options import describe_defaults

    function.__doc__ += "\n\n    Options and their defaults (a task's own in parentheses):\n" + \
        describe_defaults()


_with_option_defaults(search)
_with_option_defaults(search_iter)
