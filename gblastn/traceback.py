"""Traceback: alignments with edit scripts on the subject's true letters.

Blast_TracebackFromHSPList for one subject (and one query batch), both of its nucleotide
paths: greedy (megablast) and X-drop dynamic programming (blastn, blastn-short).

1. HSPs in score order; one contained in an HSP already traced is dropped;
2. the start point: BlastGetStartForGappedAlignmentNucl from the stored gapped start (or
   BlastGetOffsetsForGappedAlignment when none was stored), AdjustSubjectRange for long
   subjects, then the alignment with gap_x_dropoff_final: BLAST_GreedyGappedAlignment with
   traceback, or ALIGN_EX (BLAST_GappedAlignmentWithTraceback) for DP, whose HSPs also face
   the percent-identity test at once;
3. common endpoints purged without deleting (the losers are trimmed); then rescoring with
   the ambiguity scores (dropped below the cutoff) and the percent identity test: for every
   HSP after a greedy traceback (the greedy aligner ignored ambiguities), only for the
   trimmed ones after DP;
4. common endpoints purged, sorted by score, contained HSPs dropped.
"""

from functools import lru_cache

import numpy as np
from numba import njit

from .alphabet import score_matrix
from .dynprog import adjust_subject_range, gapped_offsets, gapped_start_nucl, traceback_dp
from .greedy import greedy_gapped_alignment
from .hsp import Hsps, alloc_tree, containment_filter, count_identities, \
    fails_identity_or_length, hsp_rows, hsp_scripts, hsps_from_rows, new_tree, \
    purge_common_endpoints, reevaluate_with_ambiguities, score_order, tree_add, \
    tree_contains, trim_common_endpoints


def traceback_subject(hsps: Hsps, batch, subject_codes: np.ndarray, stats, options) -> Hsps:
    """Traced HSPs of one subject: the preliminary `hsps` (whole-subject coordinates),
    aligned on `subject_codes` (the subject's blastna letters, ambiguity codes included).
    Uses stats.gapped_cutoff[context], stats.gap_xdrop_final and options' scoring, task
    (options.greedy picks the aligner), min_diag_separation and perc_identity.  Returns
    HSPs sorted by score with edit scripts; E-values and bit scores are left to the
    caller."""
    if len(hsps) == 0:
        return Hsps.empty()
    hsps = hsps.take(score_order(hsps))
    subject = np.ascontiguousarray(subject_codes, dtype=np.uint8)
    query = np.ascontiguousarray(batch.sequence, dtype=np.uint8)
    unmasked = np.ascontiguousarray(batch.unmasked_sequence, dtype=np.uint8)
    matrix = _matrix(int(options.reward), int(options.penalty))
    xdrop = int(stats.gap_xdrop_final)
    min_diag = int(options.min_diag_separation)
    if not options.greedy:
        # the whole DP path in one compiled call, then the same final steps as below
        traced = _dp_traceback_all(hsps, batch, query, unmasked, subject, matrix, xdrop,
                                   options)
        if len(traced) == 0:
            return Hsps.empty()
        traced, first_trimmed = trim_common_endpoints(traced)
        traced = _rescore(traced, first_trimmed, batch, query, unmasked, subject, matrix,
                          stats, options)
        traced = purge_common_endpoints(traced, purge=True)
        traced = traced.take(score_order(traced))
        return containment_filter(traced, min_diag)

    rows, scripts = [], []
    tree = new_tree(len(hsps), min_diag)
    held = 0
    context_offset = batch.context_offset.tolist()
    context_length = batch.context_length.tolist()
    for ctx, qs, qe, ss, se, score, qg, sg in hsp_rows(hsps).tolist():
        if tree_contains(tree, held, ctx, qs, qe, ss, se, score, min_diag):
            continue
        q_base = context_offset[ctx]
        q_length = context_length[ctx]
        context_letters = query[q_base:q_base + q_length]
        if qg == 0 and sg == 0:
            found, qg, sg = gapped_offsets(context_letters, subject, matrix, qs, qe, ss, se)
            if not found:
                continue
        else:
            qg, sg = gapped_start_nucl(context_letters, subject, qs, qe, ss, se, qg, sg)
        qg, sg = int(qg), int(sg)
        score, q0, q1, s0, s1, ops, lens = _greedy_traceback(query, q_base, q_length, subject,
                                                             qg, sg, xdrop, options)
        rows.append([ctx, q0, q1, s0, s1, score, qg, sg])
        scripts.append((ops, lens))
        held = tree_add(tree, held, ctx, q0, q1, s0, s1, score)
    if not rows:
        return Hsps.empty()

    # greedy: every HSP is rescored with ambiguities (BLAST does so for the greedy path)
    traced, _ = trim_common_endpoints(hsps_from_rows(rows, scripts))
    traced = _rescore(traced, 0, batch, query, unmasked, subject, matrix, stats, options)
    traced = purge_common_endpoints(traced, purge=True)
    traced = traced.take(score_order(traced))
    return containment_filter(traced, min_diag)


@lru_cache(maxsize=16)
def _matrix(reward: int, penalty: int) -> np.ndarray:
    """The scoring matrix as the aligners take it, built once per reward/penalty pair and
    shared by all threads (nothing writes to it)."""
    return score_matrix(reward, penalty).astype(np.int64)


def _greedy_traceback(query, q_base, q_length, subject, qg, sg, xdrop, options):
    """BLAST_GreedyGappedAlignment with traceback from (qg, sg) in the subject window of
    AdjustSubjectRange.  Returns (score, q0, q1, s0, s1, ops, lens), whole-subject
    coordinates."""
    shift, s_in_window, window = (int(v) for v in
                                  adjust_subject_range(sg, subject.size, qg, q_length))
    res = greedy_gapped_alignment(query, q_base, q_length, subject, shift, window, False,
                                  qg, s_in_window, xdrop, int(options.reward),
                                  int(options.penalty), int(options.gapopen),
                                  int(options.gapextend), True)
    score, q0, q1, s0, s1 = (int(v) for v in res[:5])
    n_ops = int(res[9])
    return (score, q0, q1, s0 + shift, s1 + shift,
            res[7][:n_ops].copy(), res[8][:n_ops].copy())


def _dp_traceback_all(hsps: Hsps, batch, query, unmasked, subject, matrix, xdrop,
                      options) -> Hsps:
    """Steps 1-2 for the DP path, for all of a subject's HSPs (in score order) at once:
    the traced HSPs, with edit scripts, that are neither contained in an earlier one nor
    below the percent identity."""
    rows, op_start, ops, op_len = _dp_traceback_rows(
        hsp_rows(hsps), np.ascontiguousarray(batch.context_offset, dtype=np.int64),
        np.ascontiguousarray(batch.context_length, dtype=np.int64), query, unmasked, subject,
        matrix, int(options.gapopen), int(options.gapextend), xdrop,
        int(options.min_diag_separation), float(options.perc_identity))
    traced = hsps_from_rows(rows)
    traced.op_start, traced.ops, traced.op_len = op_start, ops, op_len
    return traced


@njit(cache=True, nogil=True)
def _dp_traceback_rows(rows_in, context_offset, context_length, query, unmasked, subject,
                       matrix, gap_open, gap_extend, xdrop, min_diag, perc_identity):
    """The loop of traceback_subject for DP: containment test, start point, ALIGN_EX from
    it, percent identity test (Blast_HSPTestIdentityAndLength, no minimum length), in
    order. rows_in: int64 [n, 8] (hsp_rows). Returns the kept rows [k, 8] (start point
    updated) and their edit scripts: op_start [k + 1], ops, op_len."""
    n = rows_in.shape[0]
    rows = np.empty((n, 8), dtype=np.int64)
    op_start = np.zeros(n + 1, dtype=np.int64)
    ops = np.empty(256, dtype=np.uint8)
    op_len = np.empty(256, dtype=np.int32)
    tree = alloc_tree(n, min_diag)
    held = 0
    kept = 0
    for i in range(n):
        ctx = rows_in[i, 0]
        qs = rows_in[i, 1]
        qe = rows_in[i, 2]
        ss = rows_in[i, 3]
        se = rows_in[i, 4]
        qg = rows_in[i, 6]
        sg = rows_in[i, 7]
        if tree_contains(tree, held, ctx, qs, qe, ss, se, rows_in[i, 5], min_diag):
            continue
        q_base = context_offset[ctx]
        letters = query[q_base:q_base + context_length[ctx]]
        if qg == 0 and sg == 0:
            found, qg, sg = gapped_offsets(letters, subject, matrix, qs, qe, ss, se)
            if not found:
                continue
        else:
            qg, sg = gapped_start_nucl(letters, subject, qs, qe, ss, se, qg, sg)
        score, q0, q1, s0, s1, script, lens = traceback_dp(letters, qg, subject, sg, matrix,
                                                           gap_open, gap_extend, xdrop)
        if script.size == 0:
            continue
        ident, length = count_identities(unmasked, q_base, subject, q0, s0, script, lens)
        if ident * 100.0 < length * perc_identity:  # fails_identity_or_length
            continue
        rows[kept, 0] = ctx
        rows[kept, 1] = q0
        rows[kept, 2] = q1
        rows[kept, 3] = s0
        rows[kept, 4] = s1
        rows[kept, 5] = score
        rows[kept, 6] = qg
        rows[kept, 7] = sg
        start = op_start[kept]
        end = start + script.size
        if end > ops.size:
            ops = _grown_to(ops, end)
            op_len = _grown_to(op_len, end)
        ops[start:end] = script
        op_len[start:end] = lens
        kept += 1
        op_start[kept] = end
        held = tree_add(tree, held, ctx, q0, q1, s0, s1, score)
    used = op_start[kept]
    return rows[:kept].copy(), op_start[:kept + 1].copy(), ops[:used].copy(), \
        op_len[:used].copy()


@njit(cache=True, nogil=True)
def _grown_to(array, need):
    """`array` copied into one of at least `need` elements (doubling)."""
    out = np.empty(max(need, 2 * array.size), dtype=array.dtype)
    out[:array.size] = array
    return out


def _rescore(hsps: Hsps, first: int, batch, query, unmasked, subject, matrix, stats,
             options) -> Hsps:
    """Blast_HSPReevaluateWithAmbiguitiesGapped and Blast_HSPTestIdentityAndLength on the
    HSPs from index `first` on; drops the ones that fail, keeps the others as they are."""
    if first >= len(hsps):
        return hsps
    rows, scripts = [], []
    for k, (r, (ops, nums)) in enumerate(zip(hsp_rows(hsps), hsp_scripts(hsps))):
        if k < first:
            rows.append(r)
            scripts.append((ops, nums))
            continue
        ctx = int(r[0])
        q_base = int(batch.context_offset[ctx])
        cutoff = int(stats.gapped_cutoff[ctx])
        keep, score, qs, qe, ss, se, first_run, last_run, last_num = \
            reevaluate_with_ambiguities(
                query, q_base, int(batch.context_length[ctx]), subject, int(r[1]), int(r[3]),
                ops, nums, matrix, int(options.reward), int(options.penalty),
                int(options.gapopen), int(options.gapextend), cutoff)
        if not keep:
            continue
        ops, nums = ops[first_run:last_run + 1].copy(), nums[first_run:last_run + 1].copy()
        nums[-1] = last_num
        ident, length = count_identities(unmasked, q_base, subject, qs, ss, ops, nums)
        if fails_identity_or_length(ident, length, options.perc_identity):
            continue
        rows.append([ctx, qs, qe, ss, se, score, int(r[6]), int(r[7])])
        scripts.append((ops, nums))
    if not rows:
        return hsps_from_rows(np.zeros((0, 8), dtype=np.int64), [])
    return hsps_from_rows(rows, scripts)
