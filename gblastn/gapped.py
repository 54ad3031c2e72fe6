"""Preliminary gapped stage for megablast: greedy score-only extension of one subject chunk.

BLAST_GetGappedScore's greedy branch, then Blast_HSPListPurgeHSPsWithCommonEndpoints
(purge) and Blast_HSPListSortByScore, as s_BlastSearchEngineCore runs them per chunk.
"""

import numpy as np
from numba import njit

from .greedy import greedy_gapped_alignment
from .hsp import Hsps, hsps_from_rows, purge_common_endpoints, score_order, tree_add, \
    tree_contains


@njit(cache=True, nogil=True)
def _extend_hits(q_start, s_start, length, score, context, context_offset, context_length,
                 sequence, packed, chunk_length, cutoffs, xdrop, reward, penalty, gap_open,
                 gap_extend, min_diag_separation):
    """Extend the initial hits in order; returns int64 rows [n, 8] (context, q_start, q_end,
    s_start, s_end, score, q_gapped_start, s_gapped_start) of the kept gapped HSPs."""
    n = q_start.size
    rows = np.empty((n, 8), dtype=np.int64)
    kept = 0
    tree = np.zeros((max(n, 1), 7), dtype=np.int64)
    held = 0
    for i in range(n):
        ctx = context[i]
        base = context_offset[ctx]
        qs = q_start[i] - base
        ss = s_start[i]
        ln = length[i]
        # skip hits inside an HSP already found (the test uses the ungapped score)
        if tree_contains(tree, held, ctx, qs, qs + ln, ss, ss + ln, score[i],
                         min_diag_separation):
            continue
        # start from the middle of the ungapped alignment
        res = greedy_gapped_alignment(sequence, base, context_length[ctx], packed, 0,
                                      chunk_length, True, qs + ln // 2, ss + ln // 2, xdrop,
                                      reward, penalty, gap_open, gap_extend, False)
        gapped_score = res[0]
        if gapped_score < cutoffs[ctx]:
            continue
        rows[kept, 0] = ctx
        rows[kept, 1] = res[1]
        rows[kept, 2] = res[2]
        rows[kept, 3] = res[3]
        rows[kept, 4] = res[4]
        rows[kept, 5] = gapped_score
        rows[kept, 6] = res[5]
        rows[kept, 7] = res[6]
        kept += 1
        held = tree_add(tree, held, ctx, res[1], res[2], res[3], res[4], gapped_score)
    return rows[:kept]


def prelim_gapped(hits_q_start, hits_s_start, hits_length, hits_score, batch, packed_chunk,
                  chunk_length, stats, options) -> Hsps:
    """Gapped HSPs of one subject chunk from its initial (ungapped) hits.

    hits_*: the chunk's initial hits in Blast_InitHitListSortByScore order; q_start is a
    concatenated query offset (into batch.sequence), s_start chunk-relative.  packed_chunk:
    the chunk's 2-bit bytes (base i at byte i//4, first base in the high bits).  Uses
    stats.gapped_cutoff[context] and stats.gap_xdrop, and options' scoring and
    min_diag_separation.  Returns the HSPs (query coordinates context-relative, subject
    chunk-relative) with common endpoints purged, sorted by score."""
    n = int(np.asarray(hits_score).size)
    if n == 0:
        return Hsps.empty()
    q_start = np.ascontiguousarray(hits_q_start, dtype=np.int64)
    offsets = np.ascontiguousarray(batch.context_offset, dtype=np.int64)
    context = (np.searchsorted(offsets, q_start, side="right") - 1).astype(np.int64)
    rows = _extend_hits(
        q_start, np.ascontiguousarray(hits_s_start, dtype=np.int64),
        np.ascontiguousarray(hits_length, dtype=np.int64),
        np.ascontiguousarray(hits_score, dtype=np.int64), context, offsets,
        np.ascontiguousarray(batch.context_length, dtype=np.int64),
        np.ascontiguousarray(batch.sequence, dtype=np.uint8),
        np.ascontiguousarray(packed_chunk, dtype=np.uint8), int(chunk_length),
        np.ascontiguousarray(stats.gapped_cutoff, dtype=np.int64), int(stats.gap_xdrop),
        int(options.reward), int(options.penalty), int(options.gapopen), int(options.gapextend),
        int(options.min_diag_separation))
    hsps = purge_common_endpoints(hsps_from_rows(rows), purge=True)
    return hsps.take(score_order(hsps))
