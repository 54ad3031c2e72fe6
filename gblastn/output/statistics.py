"""What the reports print per query beside its hits (BLAST's CBlastAncillaryData and
masked query regions): the Karlin-Altschul blocks, the length adjustment and the effective
search space of the query's first valid context, and the query's masked ranges.

They are computed again here, from the queries, the options and the database's size for
E-values, with the functions the search used (gblastn.stats): every value is a context's own,
whatever else was in the search's batch, so the numbers are the search's.
"""

from dataclasses import dataclass, replace

from ..stats import KarlinBlock


@dataclass(frozen=True)
class QueryStatistics:
    length_adjustment: int
    search_space: int
    ungapped: KarlinBlock | None   # None: no valid context (an empty query)
    gapped: KarlinBlock | None
    # half-open ranges of the plus strand masked (DUST, lower case with -lcase_masking)
    masked: tuple = ()
    # letters searched, none of whose contexts has Karlin-Altschul parameters (all N, or
    # masked whole): blastn's XML and JSON reports say so
    invalid: bool = False

    @property
    def of_evalues(self) -> KarlinBlock | None:
        """The block the E-values came from: the gapped one, or the ungapped one in an
        ungapped search (which has no gapped block)."""
        return self.gapped if self.gapped is not None else self.ungapped


NO_STATISTICS = QueryStatistics(0, 0, None, None)
# a query of a batch blastn did not search (query.mark_unsearched_batch): its blocks are
# BLAST's unset ones
UNSET_BLOCK = KarlinBlock(-1.0, -1.0, 0.0, -1.0)


def query_statistics(queries: list, db, options) -> list:
    """One QueryStatistics per query, in order."""
    from ..query import build_batch
    from ..stats import prepare_statistics

    searched = [query for query in queries if query.searched_length]
    found = iter(())
    if searched:
        batch = build_batch(searched, options)
        stats = prepare_statistics(batch, db.stats_letters, db.stats_num_seqs, options)
        found = iter([_on_whole_query(_first_valid(stats, 2 * i, batch), query)
                      for i, query in enumerate(searched)])
    return [_unset_if_unsearched(next(found) if query.searched_length else NO_STATISTICS,
                                 query) for query in queries]


def _unset_if_unsearched(statistics: QueryStatistics, query) -> QueryStatistics:
    """A query of a batch blastn did not search shows unset blocks and no masks (its
    set-up, which finds them, failed), whatever its letters."""
    if not query.batch_unsearched:
        return statistics
    return replace(statistics, ungapped=UNSET_BLOCK, gapped=UNSET_BLOCK, masked=())


def _on_whole_query(statistics: QueryStatistics, query) -> QueryStatistics:
    """The masked ranges of the letters -query_loc searched, placed on the whole query."""
    if query.location is None:
        return statistics
    start = query.location.start
    return replace(statistics, masked=tuple((a + start, b + start)
                                            for a, b in statistics.masked))


def _first_valid(stats, first_context: int, batch) -> QueryStatistics:
    """The values of the query's first valid context (its plus strand unless only the minus
    strand is searched)."""
    masked = _plus_strand_masks(batch, first_context)
    for context in (first_context, first_context + 1):
        if stats.valid[context]:
            return QueryStatistics(int(stats.length_adjustment[context]),
                                   int(stats.eff_searchsp[context]),
                                   stats.kbp_ungapped[context], stats.kbp_gapped[context],
                                   masked)
    return QueryStatistics(0, 0, None, None, masked, invalid=True)


def _plus_strand_masks(batch, plus_context: int) -> tuple:
    """The query's masked ranges on its plus strand: the plus context's, or the minus
    context's mirrored when only the minus strand is searched."""
    if batch.context_length[plus_context]:
        return tuple((int(a), int(b)) for a, b in batch.masks[plus_context])
    length = int(batch.context_length[plus_context + 1])
    return tuple(sorted((length - int(b), length - int(a))
                        for a, b in batch.masks[plus_context + 1]))
