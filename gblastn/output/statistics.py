"""The search statistics that the reports print per query (BLAST's CBlastAncillaryData):
the Karlin-Altschul blocks, the length adjustment and the effective search space of the
query's first valid context.

They are computed again here, from the queries, the options and the database's totals, with
the functions the search used (gblastn.stats): every value is a context's own, whatever
else was in the search's batch, so the numbers are the search's.
"""

from dataclasses import dataclass

from ..stats import KarlinBlock


@dataclass(frozen=True)
class QueryStatistics:
    length_adjustment: int
    search_space: int
    ungapped: KarlinBlock | None   # None: no valid context (an empty query)
    gapped: KarlinBlock | None


NO_STATISTICS = QueryStatistics(0, 0, None, None)


def query_statistics(queries: list, db, options) -> list:
    """One QueryStatistics per query, in order."""
    from ..query import build_batch
    from ..stats import prepare_statistics

    searched = [query for query in queries if len(query)]
    if not searched:
        return [NO_STATISTICS for _ in queries]
    batch = build_batch(searched, options)
    stats = prepare_statistics(batch, db.total_letters, db.num_seqs, options)
    found = iter([_first_valid(stats, 2 * i) for i in range(len(searched))])
    return [next(found) if len(query) else NO_STATISTICS for query in queries]


def _first_valid(stats, first_context: int) -> QueryStatistics:
    """The values of the query's first valid context (its plus strand unless only the minus
    strand is searched)."""
    for context in (first_context, first_context + 1):
        if stats.valid[context]:
            return QueryStatistics(int(stats.length_adjustment[context]),
                                   int(stats.eff_searchsp[context]),
                                   stats.kbp_ungapped[context], stats.kbp_gapped[context])
    return NO_STATISTICS
