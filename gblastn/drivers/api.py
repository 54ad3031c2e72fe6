"""The Python API's search (gblastn.search): the serial driver, its stages' pieces on a pool
of options.num_threads threads."""

from dataclasses import dataclass


@dataclass
class QueryHits:
    """The Python API's result for one query: its id, defline and length, and one dict per
    HSP keyed by tabular column name (see gblastn.output.tabular.hit_records)."""

    query_id: str
    defline: str
    length: int
    hits: list


def search_queries(queries: list, db, options, backend=None, times=None):
    """Yield one QueryResult per query, in input order. `backend`: a scan Backend (the CPU's
    when None); `times`: a StageTimes to count the search's time in."""
    from ..pools import TaskPool
    from ..scan.backend import CPU
    from ..timing import StageTimes
    from . import Search
    from .serial import search_results

    search = Search(db, options, times or StageTimes(), backend or CPU)
    with TaskPool(options.num_threads) as pool:
        yield from search_results(search, queries, pool)


def search(queries, db, columns: str = "std score sstrand qlen slen", backend=None,
           **options) -> list:
    """Python API: search queries (a FASTA path, FASTA text, or a list of sequence strings or
    Query records) against a database (a path or an open Database), with blastn's options as
    keyword arguments (task="megablast", evalue=1e-5, num_threads=4, ...). Returns one
    QueryHits per query, in input order."""
    from ..db.reader import open_db
    from ..options import make_options
    from ..output.tabular import hit_records
    from ..query import read_queries

    settings = make_options(**options)
    own_db = not hasattr(db, "volumes")
    database = open_db(db) if own_db else db
    try:
        queries = read_queries(queries)
        return [QueryHits(q.id, q.defline, len(q), hit_records(q, r, database, columns))
                for q, r in zip(queries, search_queries(queries, database, settings, backend))]
    finally:
        if own_db:
            database.close()
