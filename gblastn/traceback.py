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

import numpy as np

from .alphabet import score_matrix
from .dynprog import adjust_subject_range, gapped_offsets, gapped_start_nucl, traceback_dp
from .greedy import greedy_gapped_alignment
from .hsp import Hsps, containment_filter, count_identities, fails_identity_or_length, \
    hsp_rows, hsp_scripts, hsps_from_rows, new_tree, purge_common_endpoints, \
    reevaluate_with_ambiguities, score_order, tree_add, tree_contains, trim_common_endpoints


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
    matrix = score_matrix(options.reward, options.penalty).astype(np.int64)
    xdrop = int(stats.gap_xdrop_final)
    min_diag = int(options.min_diag_separation)
    greedy = options.greedy

    rows, scripts = [], []
    tree = new_tree(len(hsps), min_diag)
    held = 0
    for r in hsp_rows(hsps):
        ctx, qs, qe, ss, se, score, qg, sg = (int(v) for v in r)
        if tree_contains(tree, held, ctx, qs, qe, ss, se, score, min_diag):
            continue
        q_base = int(batch.context_offset[ctx])
        q_length = int(batch.context_length[ctx])
        context_letters = query[q_base:q_base + q_length]
        if qg == 0 and sg == 0:
            found, qg, sg = gapped_offsets(context_letters, subject, matrix, qs, qe, ss, se)
            if not found:
                continue
        else:
            qg, sg = gapped_start_nucl(context_letters, subject, qs, qe, ss, se, qg, sg)
        qg, sg = int(qg), int(sg)
        if greedy:
            traced = _greedy_traceback(query, q_base, q_length, subject, qg, sg, xdrop, options)
        else:
            traced = _dp_traceback(context_letters, subject, qg, sg, matrix, xdrop, options)
        if traced is None:
            continue
        score, q0, q1, s0, s1, ops, lens = traced
        if not greedy:
            ident, length = count_identities(unmasked, q_base, subject, q0, s0, ops, lens)
            if fails_identity_or_length(ident, length, options.perc_identity):
                continue
        rows.append([ctx, q0, q1, s0, s1, score, qg, sg])
        scripts.append((ops, lens))
        held = tree_add(tree, held, ctx, q0, q1, s0, s1, score)
    if not rows:
        return Hsps.empty()

    traced, first_trimmed = trim_common_endpoints(hsps_from_rows(rows, scripts))
    traced = _rescore(traced, 0 if greedy else first_trimmed, batch, query, unmasked, subject,
                      matrix, stats, options)
    traced = purge_common_endpoints(traced, purge=True)
    traced = traced.take(score_order(traced))
    return containment_filter(traced, min_diag)


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


def _dp_traceback(context_letters, subject, qg, sg, matrix, xdrop, options):
    """ALIGN_EX from (qg, sg) (traceback_dp cuts long subjects itself).  Returns (score, q0,
    q1, s0, s1, ops, lens), or None when nothing aligned."""
    score, q0, q1, s0, s1, ops, lens = traceback_dp(
        context_letters, qg, subject, sg, matrix, int(options.gapopen),
        int(options.gapextend), xdrop)
    if ops.size == 0:
        return None
    return int(score), int(q0), int(q1), int(s0), int(s1), ops, lens


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
