"""Traceback for megablast: greedy alignment with edit script on the subject's true letters.

Blast_TracebackFromHSPList with greedy traceback, for one subject (and one query batch):

1. HSPs in score order; one contained in an HSP already traced is dropped;
2. the start point: BlastGetStartForGappedAlignmentNucl from the stored gapped start (or
   BlastGetOffsetsForGappedAlignment when none was stored), AdjustSubjectRange for long
   subjects, then BLAST_GreedyGappedAlignment with traceback and gap_x_dropoff_final;
3. common endpoints purged without deleting (trimming); every HSP rescored with the
   ambiguity scores (dropped below the cutoff), then the percent identity test;
4. common endpoints purged, sorted by score, contained HSPs dropped.
"""

import numpy as np
from numba import njit

from .alphabet import score_matrix
from .greedy import OUTSIDE, greedy_gapped_alignment
from .hsp import Hsps, count_identities, fails_identity_or_length, hsps_from_rows, \
    purge_common_endpoints, containment_filter, hsp_rows, hsp_scripts, \
    reevaluate_with_ambiguities, score_order, tree_add, tree_contains, new_tree

HSP_MAX_WINDOW = 11         # window of BlastGetOffsetsForGappedAlignment
MAX_SUBJECT_OFFSET = 90000  # AdjustSubjectRange leaves shorter subjects whole
MAX_TOTAL_GAPS = 3000


@njit(cache=True, nogil=True, inline="always")
def _s(subject, pos):
    if pos < 0 or pos >= subject.size:
        return OUTSIDE
    return subject[pos]


@njit(cache=True, nogil=True)
def start_for_gapped_alignment_nucl(query, q_base, subject, q_start, q_end, s_start, s_end,
                                    q_gapped, s_gapped):
    """BlastGetStartForGappedAlignmentNucl: keep the stored start when it lies in an exact
    run longer than 10; otherwise the middle of the first run longer than 15 on its
    diagonal within the HSP, or of the longest run.  Letters compare as codes."""
    max_run = 10
    offset = min(s_gapped - s_start, q_gapped - q_start)
    score = -1
    qi = q_gapped
    si = s_gapped
    while qi < q_end:
        a = query[q_base + qi]
        b = _s(subject, si)
        qi += 1
        si += 1
        if a != b:
            break
        score += 1
        if score > max_run:
            return q_gapped, s_gapped
    qi = q_gapped
    si = s_gapped
    while qi >= 0:
        a = query[q_base + qi]
        b = _s(subject, si)
        qi -= 1
        si -= 1
        if a != b:
            break
        score += 1
        if score > max_run:
            return q_gapped, s_gapped
    max_run = 15
    q0 = q_gapped - offset
    s0 = s_gapped - offset
    span = min(s_end - s0, q_end - q0)
    max_score = 0
    max_offset = q0
    score = 0
    match = False
    prev_match = False
    index = q0
    while index < q0 + span:
        match = query[q_base + index] == _s(subject, s0 + index - q0)
        if match != prev_match:
            prev_match = match
            if match:
                score = 1
            elif score > max_score:
                max_score = score
                max_offset = index - score // 2
        elif match:
            score += 1
            if score > max_run:
                max_offset = index - max_run // 2
                return max_offset, max_offset + s0 - q0
        index += 1
    if match and score > max_score:
        max_score = score
        max_offset = index - score // 2
    if max_score > 0:
        return max_offset, max_offset + s0 - q0
    return q_gapped, s_gapped


@njit(cache=True, nogil=True)
def offsets_for_gapped_alignment(query, q_base, subject, matrix, q_start, q_end, s_start,
                                 s_end):
    """BlastGetOffsetsForGappedAlignment: the end of the best-scoring 11-letter window on the
    HSP's first diagonal, else the middle of its last window.  Returns (found, q, s)."""
    q_length = q_end - q_start
    s_length = s_end - s_start
    if q_length <= HSP_MAX_WINDOW:
        return True, q_start + q_length // 2, s_start + q_length // 2
    score = 0
    for i in range(HSP_MAX_WINDOW):
        score += matrix[query[q_base + q_start + i], subject[s_start + i]]
    max_score = score
    max_offset = q_start + HSP_MAX_WINDOW - 1
    for index in range(q_start + HSP_MAX_WINDOW, q_start + min(q_length, s_length)):
        j = index - q_start
        score -= matrix[query[q_base + index - HSP_MAX_WINDOW],
                        subject[s_start + j - HSP_MAX_WINDOW]]
        score += matrix[query[q_base + index], subject[s_start + j]]
        if score > max_score:
            max_score = score
            max_offset = index
    if max_score > 0:
        return True, max_offset, max_offset - q_start + s_start
    score = 0
    for i in range(HSP_MAX_WINDOW):
        score += matrix[query[q_base + q_end - HSP_MAX_WINDOW + i],
                        subject[s_end - HSP_MAX_WINDOW + i]]
    if score > 0:
        return True, q_end - HSP_MAX_WINDOW // 2, s_end - HSP_MAX_WINDOW // 2
    return False, q_start, s_start


def adjust_subject_range(s_offset: int, subject_length: int, q_offset: int, query_length: int):
    """AdjustSubjectRange: for subjects of 90000 letters or more, align within a window
    around the start point.  Returns (shift, start point in the window, window length)."""
    if subject_length < MAX_SUBJECT_OFFSET:
        return 0, s_offset, subject_length
    max_left = q_offset + MAX_TOTAL_GAPS
    max_right = query_length - q_offset + MAX_TOTAL_GAPS
    if s_offset <= max_left:
        shift, start = 0, s_offset
    else:
        shift, start = s_offset - max_left, max_left
    return shift, start, min(subject_length, s_offset + max_right) - shift


def traceback_subject(hsps: Hsps, batch, subject_codes: np.ndarray, stats, options) -> Hsps:
    """Traced HSPs of one subject: the preliminary `hsps` (whole-subject coordinates),
    aligned on `subject_codes` (the subject's blastna letters, ambiguity codes included).
    Uses stats.gapped_cutoff[context], stats.gap_xdrop_final and options' scoring,
    min_diag_separation and perc_identity.  Returns HSPs sorted by score with edit scripts;
    E-values and bit scores are left to the caller."""
    if len(hsps) == 0:
        return Hsps.empty()
    hsps = hsps.take(score_order(hsps))
    subject = np.ascontiguousarray(subject_codes, dtype=np.uint8)
    query = np.ascontiguousarray(batch.sequence, dtype=np.uint8)
    matrix = score_matrix(options.reward, options.penalty).astype(np.int64)
    reward, penalty = int(options.reward), int(options.penalty)
    gap_open, gap_extend = int(options.gapopen), int(options.gapextend)
    xdrop = int(stats.gap_xdrop_final)
    min_diag = int(options.min_diag_separation)

    rows, scripts = [], []
    tree = new_tree(len(hsps))
    held = 0
    for r in hsp_rows(hsps):
        ctx, qs, qe, ss, se, score, qg, sg = (int(v) for v in r)
        if tree_contains(tree, held, ctx, qs, qe, ss, se, score, min_diag):
            continue
        q_base = int(batch.context_offset[ctx])
        q_length = int(batch.context_length[ctx])
        if qg == 0 and sg == 0:
            found, qg, sg = offsets_for_gapped_alignment(query, q_base, subject, matrix,
                                                         qs, qe, ss, se)
            if not found:
                continue
        else:
            qg, sg = start_for_gapped_alignment_nucl(query, q_base, subject, qs, qe, ss, se,
                                                     qg, sg)
        qg, sg = int(qg), int(sg)
        shift, s_in_window, window = adjust_subject_range(sg, subject.size, qg, q_length)
        res = greedy_gapped_alignment(query, q_base, q_length, subject, shift, window, False,
                                      qg, s_in_window, xdrop, reward, penalty, gap_open,
                                      gap_extend, True)
        score, q0, q1, s0, s1 = (int(v) for v in res[:5])
        n_ops = int(res[9])
        row = [ctx, q0, q1, s0 + shift, s1 + shift, score, qg, sg]
        rows.append(row)
        scripts.append((res[7][:n_ops].copy(), res[8][:n_ops].copy()))
        held = tree_add(tree, held, ctx, row[1], row[2], row[3], row[4], score)
    if not rows:
        return Hsps.empty()

    traced = purge_common_endpoints(hsps_from_rows(rows, scripts), purge=False)
    traced = _rescore(traced, batch, query, subject, matrix, stats, options)
    traced = purge_common_endpoints(traced, purge=True)
    traced = traced.take(score_order(traced))
    return containment_filter(traced, min_diag)


def _rescore(hsps: Hsps, batch, query, subject, matrix, stats, options) -> Hsps:
    """Blast_HSPReevaluateWithAmbiguitiesGapped and Blast_HSPTestIdentityAndLength on every
    HSP; drops the ones that fail."""
    unmasked = np.ascontiguousarray(batch.unmasked_sequence, dtype=np.uint8)
    rows, scripts = [], []
    for r, (ops, nums) in zip(hsp_rows(hsps), hsp_scripts(hsps)):
        ctx = int(r[0])
        q_base = int(batch.context_offset[ctx])
        cutoff = int(stats.gapped_cutoff[ctx])
        keep, score, qs, qe, ss, se, first, last, last_num = reevaluate_with_ambiguities(
            query, q_base, int(batch.context_length[ctx]), subject, int(r[1]), int(r[3]),
            ops, nums, matrix, int(options.reward), int(options.penalty),
            int(options.gapopen), int(options.gapextend), cutoff)
        if not keep:
            continue
        ops, nums = ops[first:last + 1].copy(), nums[first:last + 1].copy()
        nums[-1] = last_num
        ident, length = count_identities(unmasked, q_base, subject, qs, ss, ops, nums)
        if fails_identity_or_length(ident, length, options.perc_identity):
            continue
        rows.append([ctx, qs, qe, ss, se, score, int(r[6]), int(r[7])])
        scripts.append((ops, nums))
    if not rows:
        return hsps_from_rows(np.zeros((0, 8), dtype=np.int64), [])
    return hsps_from_rows(rows, scripts)
