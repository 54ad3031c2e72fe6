"""Preliminary gapped stage: score-only gapped extension of one subject chunk's initial hits.

BLAST_GetGappedScore, then Blast_HSPListPurgeHSPsWithCommonEndpoints (purge) and
Blast_HSPListSortByScore, as s_BlastSearchEngineCore runs them per chunk.  Two branches, as
BLAST's: greedy (megablast) from the middle of the ungapped alignment, and X-drop DP
(s_BlastDynProgNtGappedAlignment; blastn, blastn-short) from the hit's seed.  In both, an
initial hit contained in an HSP already found (same context, no better score, close
diagonal) is skipped, and a gapped HSP is kept when it reaches the context's cutoff.

Each extension, greedy or DP, is a function of its hit alone: a GPU makes them all ahead
(Engine.extensions_ahead; cuda/greedy.cu, cuda/dynprog.cu), returned as an ExtensionsAhead
record, and the in-order pass here only picks those it keeps.
"""

import numpy as np

from .alphabet import score_matrix
from .dynprog import prelim_dp_extend_in
from .greedy import greedy_gapped_alignment
from .hsp import Hsps, alloc_tree, chunk_rows, hsps_from_rows, tree_add, tree_contains
from .layouts import GAPPED_AHEAD_FIELDS, GAPPED_FIELDS, GAPPED_MADE, GAPPED_Q_END, \
    GAPPED_Q_GAPPED_START, GAPPED_Q_START, GAPPED_SCORE, GAPPED_S_END, GAPPED_S_GAPPED_START, \
    GAPPED_S_START, HSP_CONTEXT, HSP_FIELDS, HSP_Q_END, HSP_Q_GAPPED_START, HSP_Q_START, \
    HSP_SCORE, HSP_S_END, HSP_S_GAPPED_START, HSP_S_START
from .numba_start import njit
from .refcounts import borrowed


@njit(cache=True, nogil=True)
def _extend_hits(q_start, s_start, length, score, context, context_offset, context_length,
                 sequence, query_words, packed, chunk_length, cutoffs, xdrop, reward, penalty, gap_open,
                 gap_extend, min_diag_separation):
    """Extend the initial hits in order; returns int64 rows [n, HSP_FIELDS] (hsp_rows) of the
    kept gapped HSPs, and the index of the hit each came from."""
    _, kept, _, rows, origin, _ = _extend_hits_begin(
        -1, q_start, s_start, length, score, context, context_offset, context_length, sequence,
        query_words, packed, chunk_length, cutoffs, xdrop, reward, penalty, gap_open,
        gap_extend, min_diag_separation)
    return rows[:kept], origin[:kept]


@njit(cache=True, nogil=True)
def _extend_hits_begin(budget, q_start, s_start, length, score, context, context_offset,
                       context_length, sequence, query_words, packed, chunk_length, cutoffs,
                       xdrop, reward, penalty, gap_open, gap_extend, min_diag_separation):
    """_extend_hits until the alignments found span more than `budget` query letters (no
    limit when negative). Returns (the next hit, kept, held, rows, origin, tree): the state
    to go on from."""
    n = q_start.size
    # shared by the threads (see _extend_hits_dp)
    sequence, packed = borrowed(sequence), borrowed(packed)
    rows = np.empty((n, HSP_FIELDS), dtype=np.int64)
    origin = np.empty(n, dtype=np.int64)
    tree = alloc_tree(n, min_diag_separation)
    kept = 0
    held = 0
    spent = 0
    found = np.empty(GAPPED_FIELDS, dtype=np.int64)
    i = 0
    while i < n and (budget < 0 or spent <= budget):
        # skip hits inside an HSP already found (the test uses the ungapped score)
        if not _contained(i, q_start, s_start, length, score, context, context_offset, tree,
                          held, min_diag_separation):
            _greedy_from_hit(i, found, q_start, s_start, length, context, context_offset,
                             context_length, sequence, query_words, packed, chunk_length,
                             xdrop, reward, penalty, gap_open, gap_extend)
            spent += found[GAPPED_Q_END] - found[GAPPED_Q_START]
            kept, held = _keep(i, found, context[i], cutoffs, rows, origin, kept, tree, held)
        i += 1
    return i, kept, held, rows, origin, tree



@njit(cache=True, nogil=True)
def _contained(i, q_start, s_start, length, score, context, context_offset, tree, held,
               min_diag_separation):
    """Is initial hit i inside an HSP found so far (same context, no better score)?"""
    ctx = context[i]
    qs = q_start[i] - context_offset[ctx]
    return tree_contains(tree, held, ctx, qs, qs + length[i], s_start[i], s_start[i] + length[i],
                         score[i], min_diag_separation)


@njit(cache=True, nogil=True)
def _greedy_from_hit(i, found, q_start, s_start, length, context, context_offset,
                     context_length, sequence, query_words, packed, chunk_length, xdrop, reward,
                     penalty, gap_open, gap_extend):
    """The score-only greedy extension of initial hit i, from the middle of its ungapped
    alignment, into found[:GAPPED_FIELDS]. A function of the hit alone."""
    ctx = context[i]
    base = context_offset[ctx]
    half = length[i] // 2
    res = greedy_gapped_alignment(sequence, query_words, base, context_length[ctx], packed,
                                  0, chunk_length, True, q_start[i] - base + half,
                                  s_start[i] + half, xdrop, reward, penalty, gap_open,
                                  gap_extend, False)
    found[GAPPED_SCORE] = res[0]
    found[GAPPED_Q_START] = res[1]
    found[GAPPED_Q_END] = res[2]
    found[GAPPED_S_START] = res[3]
    found[GAPPED_S_END] = res[4]
    found[GAPPED_Q_GAPPED_START] = res[5]
    found[GAPPED_S_GAPPED_START] = res[6]


@njit(cache=True, nogil=True)
def _keep(i, found, ctx, cutoffs, rows, origin, kept, tree, held):
    """Hit i's gapped HSP `found` joins the rows when it reaches the context's cutoff.
    Returns (kept, held)."""
    if found[GAPPED_SCORE] < cutoffs[ctx]:
        return kept, held
    rows[kept, HSP_CONTEXT] = ctx
    rows[kept, HSP_Q_START] = found[GAPPED_Q_START]
    rows[kept, HSP_Q_END] = found[GAPPED_Q_END]
    rows[kept, HSP_S_START] = found[GAPPED_S_START]
    rows[kept, HSP_S_END] = found[GAPPED_S_END]
    rows[kept, HSP_SCORE] = found[GAPPED_SCORE]
    rows[kept, HSP_Q_GAPPED_START] = found[GAPPED_Q_GAPPED_START]
    rows[kept, HSP_S_GAPPED_START] = found[GAPPED_S_GAPPED_START]
    origin[kept] = i
    held = tree_add(tree, held, ctx, found[GAPPED_Q_START], found[GAPPED_Q_END],
                    found[GAPPED_S_START], found[GAPPED_S_END], found[GAPPED_SCORE])
    return kept + 1, held


# ----------------------------------------------------------------------------------------------
# a piece of many hits, extended ahead on several threads


# a piece whose alignments found so far span more query letters goes on in blocks: the few
# heavy pieces (hundreds of hits along one long alignment) take long enough on one thread to
# hold up a search, while most pieces take microseconds, for which a block's Python would
# cost more than it saves (docs/perf/pipeline.md)
HEAVY_LETTERS = 1_000_000
MAX_BLOCK = 64        # hits extended ahead at once, at most


@njit(cache=True, nogil=True)
def _candidates(start, want, q_start, s_start, length, score, context, context_offset, tree,
                held, min_diag_separation):
    """The first `want` hits from `start` on that no HSP found so far contains, and the index
    after the last hit looked at: the hits worth extending ahead."""
    n = q_start.size
    out = np.empty(min(want, n - start), dtype=np.int64)
    got = 0
    i = start
    while i < n and got < want:
        if not _contained(i, q_start, s_start, length, score, context, context_offset, tree,
                          held, min_diag_separation):
            out[got] = i
            got += 1
        i += 1
    return out[:got], i


@njit(cache=True, nogil=True)
def _extend_candidate(k, candidates, found, q_start, s_start, length, context, context_offset,
                      context_length, sequence, query_words, packed, chunk_length, xdrop, reward,
                      penalty, gap_open, gap_extend):
    """_greedy_from_hit of candidates[k] into found[k]: threads fill distinct rows."""
    _greedy_from_hit(candidates[k], found[k], q_start, s_start, length, context,
                     context_offset, context_length, sequence, query_words, packed,
                     chunk_length, xdrop, reward, penalty, gap_open, gap_extend)


@njit(cache=True, nogil=True)
def _apply_block(start, stop, candidates, found, q_start, s_start, length, score, context,
                 context_offset, context_length, sequence, query_words, packed, chunk_length,
                 cutoffs, xdrop, reward, penalty, gap_open, gap_extend, min_diag_separation,
                 rows, origin, kept, tree, held):
    """The in-order pass over hits [start, stop), as _extend_hits makes it: each hit is
    tested against the HSPs found so far and, when not contained, its extension is kept,
    taken from `found` for a candidate. A hit that was contained when the candidates were
    picked may not be now (a held HSP is dropped when a new one shares an end and wins):
    it is extended here. Returns (kept, held, candidates' extensions used)."""
    used = 0
    k = 0
    own = np.empty(GAPPED_FIELDS, dtype=np.int64)
    for i in range(start, stop):
        candidate = k < candidates.size and candidates[k] == i
        if candidate:
            k += 1
        if _contained(i, q_start, s_start, length, score, context, context_offset, tree, held,
                      min_diag_separation):
            continue
        if candidate:
            used += 1
            extension = found[k - 1]
        else:
            _greedy_from_hit(i, own, q_start, s_start, length, context, context_offset,
                             context_length, sequence, query_words, packed, chunk_length,
                             xdrop, reward, penalty, gap_open, gap_extend)
            extension = own
        kept, held = _keep(i, extension, context[i], cutoffs, rows, origin, kept, tree, held)
    return kept, held, used


def _extend_hits_ahead(spread, *args):
    """_extend_hits, with the same rows, for a piece that may be heavy: once its alignments
    span HEAVY_LETTERS, the rest of its hits are taken in blocks, each block's extensions
    (functions of their hits alone) run on several threads (`spread`), and an in-order pass
    keeps those _extend_hits would have kept. A block grows while all its extensions are
    used and shrinks when some were not (their hits were inside an HSP found earlier in the
    same block)."""
    (q_start, s_start, length, score, context, context_offset, context_length, sequence,
     query_words, packed, chunk_length, cutoffs, xdrop, reward, penalty, gap_open, gap_extend,
     min_diag_separation) = args
    start, kept, held, rows, origin, tree = _extend_hits_begin(HEAVY_LETTERS, *args)
    want = 2
    while start < q_start.size:
        candidates, stop = _candidates(start, want, q_start, s_start, length, score, context,
                                       context_offset, tree, held, min_diag_separation)
        found = np.empty((candidates.size, GAPPED_FIELDS), dtype=np.int64)
        spread(lambda k: _extend_candidate(
            k, candidates, found, q_start, s_start, length, context, context_offset,
            context_length, sequence, query_words, packed, chunk_length, xdrop, reward,
            penalty, gap_open, gap_extend), candidates.size)
        kept, held, used = _apply_block(
            start, stop, candidates, found, q_start, s_start, length, score, context,
            context_offset, context_length, sequence, query_words, packed, chunk_length,
            cutoffs, xdrop, reward, penalty, gap_open, gap_extend, min_diag_separation, rows,
            origin, kept, tree, held)
        want = min(2 * want, MAX_BLOCK) if used == candidates.size else max(1, want // 2)
        start = stop
    return rows[:kept], origin[:kept]


@njit(cache=True, nogil=True)
def _extend_hits_given(extensions, q_start, s_start, length, score, context, context_offset,
                       context_length, sequence, query_words, packed, chunk_length, cutoffs,
                       xdrop, reward, penalty, gap_open, gap_extend, min_diag_separation):
    """_extend_hits with the hits' extensions made ahead (ExtensionsAhead.extensions): the
    in-order pass keeps the rows _extend_hits would keep, and extends on the CPU only the
    hits left undone there."""
    n = q_start.size
    rows = np.empty((n, HSP_FIELDS), dtype=np.int64)
    origin = np.empty(n, dtype=np.int64)
    tree = alloc_tree(n, min_diag_separation)
    candidates = np.flatnonzero(extensions[:, GAPPED_MADE])
    found = np.empty((candidates.size, GAPPED_FIELDS), dtype=np.int64)
    for k in range(candidates.size):
        found[k] = extensions[candidates[k], :GAPPED_FIELDS]
    kept, _, _ = _apply_block(0, n, candidates, found, q_start, s_start, length, score, context,
                              context_offset, context_length, sequence, query_words, packed,
                              chunk_length, cutoffs, xdrop, reward, penalty, gap_open,
                              gap_extend, min_diag_separation, rows, origin, 0, tree, 0)
    return rows[:kept], origin[:kept]


@njit(cache=True, nogil=True)
def extend_chunks_given(chunks, bounds, extensions, q_start, s_start, length, score, context,
                        context_offset, context_length, sequence, query_words, buffer,
                        chunk_byte_offset, chunk_length, cutoffs, xdrop, reward, penalty,
                        gap_open, gap_extend, min_diag_separation):
    """extend_hits with extensions made ahead, for each of several whole chunks in one call
    (the Python around a call per chunk held the GIL for longer than the chunk's work): the
    hits of chunk c are [bounds[c], bounds[c + 1]) of the volume's int64 arrays, its letters
    at chunk_byte_offset[c] of `buffer`. Returns the chunks' rows back to back, each row's
    hit index within its chunk, and each chunk's row count."""
    rows, origin, counts = _run_buffers(chunks, bounds)
    at = 0
    for k in range(chunks.size):
        c = chunks[k]
        lo, hi = bounds[c], bounds[c + 1]
        first = chunk_byte_offset[c]
        packed = buffer[first:first + (chunk_length[c] + 3) // 4]
        found, came_from = _extend_hits_given(
            extensions[lo:hi], q_start[lo:hi], s_start[lo:hi], length[lo:hi], score[lo:hi],
            context[lo:hi], context_offset, context_length, sequence, query_words, packed,
            chunk_length[c], cutoffs, xdrop, reward, penalty, gap_open, gap_extend,
            min_diag_separation)
        at = _add_chunk_rows(k, at, found, came_from, rows, origin, counts)
    return rows[:at], origin[:at], counts


@njit(cache=True, nogil=True)
def extend_chunks_dp_given(chunks, bounds, extensions, q_start, s_start, length, score,
                           seed_q, seed_s, context, context_offset, context_length, sequence,
                           buffer, chunk_byte_offset, chunk_length, cutoffs, xdrop, matrix,
                           gap_open, gap_extend, min_diag_separation):
    """extend_chunks_given for the DP tasks (blastn, blastn-short): each chunk's
    _extend_hits_dp given the DP extensions made ahead, several whole chunks in one call
    (a call per chunk, with its Python, made the threads queue for the GIL)."""
    rows, origin, counts = _run_buffers(chunks, bounds)
    at = 0
    for k in range(chunks.size):
        c = chunks[k]
        lo, hi = bounds[c], bounds[c + 1]
        first = chunk_byte_offset[c]
        packed = buffer[first:first + (chunk_length[c] + 3) // 4]
        found, came_from = _extend_hits_dp(
            extensions[lo:hi], q_start[lo:hi], s_start[lo:hi], length[lo:hi], score[lo:hi],
            seed_q[lo:hi], seed_s[lo:hi], context[lo:hi], context_offset, context_length,
            sequence, packed, chunk_length[c], cutoffs, xdrop, matrix, gap_open, gap_extend,
            min_diag_separation)
        at = _add_chunk_rows(k, at, found, came_from, rows, origin, counts)
    return rows[:at], origin[:at], counts


@njit(cache=True, nogil=True)
def _run_buffers(chunks, bounds):
    """The rows, origins and per-chunk counts of a run of chunks, sized for every hit."""
    total = 0
    for k in range(chunks.size):
        total += bounds[chunks[k] + 1] - bounds[chunks[k]]
    return (np.empty((total, HSP_FIELDS), dtype=np.int64), np.empty(total, dtype=np.int64),
            np.zeros(chunks.size, dtype=np.int64))


@njit(cache=True, nogil=True)
def _add_chunk_rows(k, at, found, came_from, rows, origin, counts):
    """The k-th chunk's rows after the run's first `at`; returns the new end."""
    m = found.shape[0]
    rows[at:at + m] = found
    origin[at:at + m] = came_from
    counts[k] = m
    return at + m


@njit(cache=True, nogil=True)
def _extend_hits_dp(extensions, q_start, s_start, length, score, seed_q, seed_s, context,
                    context_offset, context_length, sequence, packed, chunk_length, cutoffs,
                    xdrop, matrix, gap_open, gap_extend, min_diag_separation):
    """As _extend_hits, with DP from each hit's seed (concatenated seed_q, chunk seed_s);
    the stored gapped start is the seed, moved +3 when the DP moved it. `extensions`: the
    hits' DP extensions made ahead (as a GPU makes them, int64 [n, GAPPED_AHEAD_FIELDS]), or
    no rows: the in-order pass takes those marked made and extends the others itself."""
    n = q_start.size
    ahead = extensions.shape[0] == n
    # the query and subject are shared by the threads: a slice or call counting them in
    # and out per hit would bounce their counts' cache line between the cores
    sequence, packed, matrix = borrowed(sequence), borrowed(packed), borrowed(matrix)
    rows = np.empty((n, HSP_FIELDS), dtype=np.int64)
    origin = np.empty(n, dtype=np.int64)
    kept = 0
    tree = alloc_tree(n, min_diag_separation)
    held = 0
    band = np.empty(1024, dtype=np.int32)  # the DP's workspace, shared by all extensions
    found = np.empty(GAPPED_FIELDS, dtype=np.int64)
    for i in range(n):
        ctx = context[i]
        base = context_offset[ctx]
        qs = q_start[i] - base
        ss = s_start[i]
        ln = length[i]
        if tree_contains(tree, held, ctx, qs, qs + ln, ss, ss + ln, score[i],
                         min_diag_separation):
            continue
        if ahead and extensions[i, GAPPED_MADE] != 0:
            found[:] = extensions[i, :GAPPED_FIELDS]
        else:
            query = sequence[base:base + context_length[ctx]]
            res = prelim_dp_extend_in(band, query, packed, chunk_length, seed_q[i] - base,
                                      seed_s[i], ss, ln, score[i], matrix, gap_open,
                                      gap_extend, xdrop)
            found[GAPPED_SCORE], found[GAPPED_Q_START], found[GAPPED_Q_END] = \
                res[0], res[1], res[2]
            found[GAPPED_S_START], found[GAPPED_S_END] = res[3], res[4]
            found[GAPPED_Q_GAPPED_START], found[GAPPED_S_GAPPED_START] = res[5], res[6]
            band = res[7]
        kept, held = _keep(i, found, ctx, cutoffs, rows, origin, kept, tree, held)
    return rows[:kept], origin[:kept]


def prelim_gapped(hits_q_start, hits_s_start, hits_length, hits_score, batch, packed_chunk,
                  chunk_length, stats, options, hits_seed_q=None, hits_seed_s=None) -> Hsps:
    """Gapped HSPs of one subject chunk from its initial (ungapped) hits.

    hits_*: the chunk's initial hits in Blast_InitHitListSortByScore order; q_start is a
    concatenated query offset (into batch.sequence), s_start chunk-relative.  packed_chunk:
    the chunk's 2-bit bytes (base i at byte i//4, first base in the high bits).  Uses
    stats.gapped_cutoff[context] and stats.gap_xdrop, and options' scoring, task and
    min_diag_separation.  hits_seed_q/hits_seed_s: the hits' seeds (InitialHits.seed_q,
    concatenated, and seed_s, chunk-relative), which the DP path (options.greedy False)
    starts from; without them the DP starts from the ungapped alignments' starts.
    Returns the HSPs (query coordinates context-relative, subject chunk-relative) with
    common endpoints purged, sorted by score."""
    rows, _ = extend_hits(hits_q_start, hits_s_start, hits_length, hits_score, batch,
                          packed_chunk, chunk_length, stats, options, hits_seed_q, hits_seed_s)
    return hsps_from_rows(chunk_rows(np.ascontiguousarray(rows, dtype=np.int64), 0, True))


def hit_contexts(hits_q_start, batch) -> np.ndarray:
    """The context of each initial hit (from its concatenated query offset)."""
    offsets = np.ascontiguousarray(batch.context_offset, dtype=np.int64)
    return (np.searchsorted(offsets, np.asarray(hits_q_start, dtype=np.int64), side="right")
            - 1).astype(np.int64)


def extend_hits(hits_q_start, hits_s_start, hits_length, hits_score, batch, packed_chunk,
                chunk_length, stats, options, hits_seed_q=None, hits_seed_s=None,
                hits_context=None, spread=None, extensions=None) -> tuple:
    """prelim_gapped's extensions, without the purge: (rows, origin), the kept gapped HSPs
    as int64 rows (hsp_rows) in the order found, and the index of the hit each came
    from. A hit is only ever tested against HSPs of its own context, so the hits of any
    set of contexts, extended apart, give the same rows as extended with the others.
    hits_context: the hits' contexts (hit_contexts), when the caller has them already.
    spread: a pool's spread (pools.TaskPool.spread), with which the greedy extensions of a
    piece of many hits run on several threads. extensions: the hits' greedy or DP
    extensions made ahead (ExtensionsAhead.extensions)."""
    n = int(np.asarray(hits_score).size)
    if n == 0:
        return np.zeros((0, HSP_FIELDS), dtype=np.int64), np.zeros(0, dtype=np.int64)
    q_start = np.ascontiguousarray(hits_q_start, dtype=np.int64)
    offsets = np.ascontiguousarray(batch.context_offset, dtype=np.int64)
    context = hit_contexts(q_start, batch) if hits_context is None else \
        np.ascontiguousarray(hits_context, dtype=np.int64)
    s_start = np.ascontiguousarray(hits_s_start, dtype=np.int64)
    length = np.ascontiguousarray(hits_length, dtype=np.int64)
    score = np.ascontiguousarray(hits_score, dtype=np.int64)
    lengths = np.ascontiguousarray(batch.context_length, dtype=np.int64)
    sequence = np.ascontiguousarray(batch.sequence, dtype=np.uint8)
    packed = np.ascontiguousarray(packed_chunk, dtype=np.uint8)
    cutoffs = np.ascontiguousarray(stats.gapped_cutoff, dtype=np.int64)
    if options.greedy:
        args = (q_start, s_start, length, score, context, offsets, lengths, sequence,
                batch.query_words, packed, int(chunk_length), cutoffs, int(stats.gap_xdrop),
                int(options.reward), int(options.penalty), int(options.gapopen),
                int(options.gapextend), int(options.min_diag_separation))
        if extensions is not None:
            return _extend_hits_given(np.ascontiguousarray(extensions, dtype=np.int64), *args)
        return _extend_hits(*args) if spread is None else _extend_hits_ahead(spread, *args)
    seed_q = q_start if hits_seed_q is None else \
        np.ascontiguousarray(hits_seed_q, dtype=np.int64)
    seed_s = s_start if hits_seed_s is None else \
        np.ascontiguousarray(hits_seed_s, dtype=np.int64)
    matrix = score_matrix(options.reward, options.penalty).astype(np.int64)
    ahead = np.zeros((0, GAPPED_AHEAD_FIELDS), dtype=np.int64) if extensions is None else \
        np.ascontiguousarray(extensions, dtype=np.int64)
    return _extend_hits_dp(
        ahead, q_start, s_start, length, score, seed_q, seed_s, context, offsets, lengths, sequence,
        packed, int(chunk_length), cutoffs, int(stats.gap_xdrop), matrix,
        int(options.gapopen), int(options.gapextend), int(options.min_diag_separation))
