"""The last stage of an ungapped search (blastn -ungapped), in place of the traceback.

An ungapped search keeps its ungapped alignments as HSPs: no gapped extension, no gapped
traceback. Its preliminary HSPs were scored on the packed subject, whose ambiguous letters
are stand-ins, so BLAST rescores each on the subject's true letters
(Blast_HSPListReevaluateUngapped): the best-scoring part of its diagonal is kept if it
still reaches the ungapped cutoff, its identities are counted, and the percent identity
test applies. Then come the E-values from the ungapped Karlin block, the E-value
threshold, the query coverage test (blastn's preliminary stage applies it when it aligns
without gaps) and the order; max_hsps comes after the subjects' final order, as after a
traceback.
"""

import numpy as np

from .alphabet import COMPLEMENT_BLASTNA
from .db.reader import CODE_OF, fill_ranges
from .hsp import Hsps, count_identities, covering, hsps_from_rows, max_hsps_candidates, \
    ranked_order, rows_by_score, score_order_rows
from .layouts import HSP_CONTEXT, HSP_FIELDS, HSP_Q_END, HSP_Q_START, HSP_S_END, \
    HSP_S_START, HSP_SCORE, OP_SUB
from .numba_start import njit
from .output.tabular import COUNT_FIELDS, counts_of_all
from .stats import EVALUE_EQUAL_BELOW, evalue_and_bits
from .traceback import _final_args, _matrix


def ungapped_group(hsps_list: list, subjects: list, query_index: list, packed, batch, stats,
                   options, scratch: np.ndarray) -> list:
    """The final HSPs of each of `hsps_list` (one subject's preliminary HSPs for one query,
    score order) against volume subject subjects[i] (a local index of `packed`, the
    volume's PackedSubjects), with the letters of the batch's query query_index[i]; all in
    one compiled call. Each subject's true letters are unpacked into `scratch`."""
    task_rows = np.zeros(len(hsps_list) + 1, dtype=np.int64)
    np.cumsum([len(hsps) for hsps in hsps_list], out=task_rows[1:])
    task_start, rows, evalue, bitscore, counts = _ungapped_group(
        np.asarray(subjects, dtype=np.int64), np.asarray(query_index, dtype=np.int64),
        task_rows, rows_by_score(hsps_list), *packed, CODE_OF, *batch.query_letters,
        np.ascontiguousarray(batch.context_offset, dtype=np.int64),
        np.ascontiguousarray(batch.context_length, dtype=np.int64),
        np.ascontiguousarray(batch.sequence, dtype=np.uint8),
        np.ascontiguousarray(batch.unmasked_sequence, dtype=np.uint8),
        _matrix(int(options.reward), int(options.penalty)),
        np.ascontiguousarray(stats.ungapped_cutoff, dtype=np.int64),
        float(options.perc_identity), *_final_args(stats, options),
        float(options.qcov_hsp_perc or 0), COMPLEMENT_BLASTNA, scratch)
    return [_final_hsps(rows[a:b], evalue[a:b], bitscore[a:b], counts[a:b])
            for a, b in zip(task_start[:-1].tolist(), task_start[1:].tolist())]


def _final_hsps(rows, evalue, bitscore, counts) -> Hsps:
    """Hsps of final rows, each aligned without gaps: one run of aligned pairs."""
    final = hsps_from_rows(rows)
    final.op_start = np.arange(len(rows) + 1, dtype=np.int64)
    final.ops = np.full(len(rows), OP_SUB, dtype=np.uint8)
    final.op_len = (rows[:, HSP_Q_END] - rows[:, HSP_Q_START]).astype(np.int32)
    final.evalue, final.bitscore, final.counts = evalue, bitscore, counts
    return final


@njit(cache=True, nogil=True)
def _ungapped_group(task_subject, task_query, task_rows, rows, packed, byte_offset, lengths,
                    amb_start, amb_offset, amb_length, amb_end, amb_code, code_of,
                    query_codes, query_start, context_offset, context_length, query, unmasked,
                    matrix, cutoffs, perc_identity, lambdas, log_ks, searchsp, round_down,
                    evalue_max, max_hsps, qcov_percent, complement, scratch):
    """ungapped_group's loop. Task i: volume subject task_subject[i], query task_query[i]
    (its letters query_codes[query_start[q]:query_start[q + 1]]), HSP rows
    task_rows[i]:task_rows[i + 1] of `rows`. Returns task_start [t + 1] (each task's final
    HSPs), then the final rows, E-values, bit scores and counts of all."""
    tasks = task_subject.size
    total = task_rows[tasks]
    task_start = np.zeros(tasks + 1, dtype=np.int64)
    out_rows = np.empty((total, HSP_FIELDS), dtype=np.int64)
    evalue = np.empty(total, dtype=np.float64)
    bitscore = np.empty(total, dtype=np.float64)
    counts = np.empty((total, COUNT_FIELDS), dtype=np.int64)
    k = 0
    for i in range(tasks):
        local = task_subject[i]
        length = lengths[local]
        subject = scratch[:length]
        bases = packed[byte_offset[local]:byte_offset[local] + (length + 3) // 4]
        a, b = amb_start[local], amb_start[local + 1]
        whole = np.array([[0, length]], dtype=np.int64)
        fill_ranges(subject, 0, whole, bases, amb_offset[a:b], amb_length[a:b], amb_end[a:b],
                    amb_code[a:b], code_of)
        q = task_query[i]
        f_rows, f_evalue, f_bits, f_counts = _final_rows(
            rows[task_rows[i]:task_rows[i + 1]], context_offset, context_length, query,
            unmasked, subject, matrix, cutoffs, perc_identity, lambdas, log_ks, searchsp,
            round_down, evalue_max, max_hsps, qcov_percent,
            query_codes[query_start[q]:query_start[q + 1]], complement)
        n = f_rows.shape[0]
        out_rows[k:k + n] = f_rows
        evalue[k:k + n] = f_evalue
        bitscore[k:k + n] = f_bits
        counts[k:k + n] = f_counts
        k += n
        task_start[i + 1] = k
    return task_start, out_rows[:k].copy(), evalue[:k].copy(), bitscore[:k].copy(), \
        counts[:k].copy()


@njit(cache=True, nogil=True)
def _final_rows(rows_in, context_offset, context_length, query, unmasked, subject, matrix,
                cutoffs, perc_identity, lambdas, log_ks, searchsp, round_down, evalue_max,
                max_hsps, qcov_percent, query_codes, complement):
    """One subject's preliminary rows (score order) rescored on its true letters
    (Blast_HSPListReevaluateUngapped), then E-values and bit scores, the E-value threshold
    and the query coverage test, which blastn applies in its preliminary stage when it
    aligns without gaps, then the E-value order and the HSPs max_hsps may keep, as after a
    traceback.
    Returns rows, E-values, bit scores and counts."""
    n = rows_in.shape[0]
    rows = np.empty((n, HSP_FIELDS), dtype=np.int64)
    kept = 0
    for i in range(n):
        row = rows_in[i].copy()
        ctx = row[HSP_CONTEXT]
        base = context_offset[ctx]
        keep, score, skipped, aligned = reevaluate_ungapped(
            query, base + row[HSP_Q_START], subject, row[HSP_S_START],
            row[HSP_Q_END] - row[HSP_Q_START], matrix, cutoffs[ctx])
        if not keep:
            continue
        q_start = row[HSP_Q_START] + skipped
        s_start = row[HSP_S_START] + skipped
        ident, _ = count_identities(unmasked, base, subject, q_start, s_start,
                                    np.full(1, OP_SUB, dtype=np.uint8),
                                    np.full(1, aligned, dtype=np.int32))
        if ident * 100.0 < aligned * perc_identity:  # Blast_HSPTest
            continue
        row[HSP_Q_START] = q_start
        row[HSP_Q_END] = q_start + aligned
        row[HSP_S_START] = s_start
        row[HSP_S_END] = s_start + aligned
        row[HSP_SCORE] = score
        rows[kept] = row
        kept += 1
    rows = rows[:kept]
    rows = rows[score_order_rows(rows)]  # the scores may have changed
    evalue = np.empty(kept, dtype=np.float64)
    bitscore = np.empty(kept, dtype=np.float64)
    for i in range(kept):
        evalue[i], bitscore[i] = evalue_and_bits(rows[i, HSP_SCORE], rows[i, HSP_CONTEXT],
                                                  lambdas, log_ks, searchsp, round_down)
    index = np.flatnonzero(evalue <= evalue_max)
    if qcov_percent > 0:
        index = covering(rows, index, context_length, qcov_percent)
    shown = evalue[index]
    shown[shown < EVALUE_EQUAL_BELOW] = 0.0
    index = max_hsps_candidates(rows, index[ranked_order(rows, index, shown)], max_hsps)
    rows = rows[index]
    op_start = np.arange(index.size + 1, dtype=np.int64)
    ops = np.full(index.size, OP_SUB, dtype=np.uint8)
    op_len = (rows[:, HSP_Q_END] - rows[:, HSP_Q_START]).astype(np.int32)
    counts = counts_of_all(query_codes, rows[:, HSP_CONTEXT].copy(),
                           rows[:, HSP_Q_START].copy(), rows[:, HSP_Q_END].copy(),
                           rows[:, HSP_S_START].copy(), subject, op_start, ops, op_len,
                           complement)
    return rows, evalue[index], bitscore[index], counts


@njit(cache=True, nogil=True)
def reevaluate_ungapped(query, q_first, subject, s_first, length, matrix, cutoff):
    """Blast_HSPReevaluateWithAmbiguitiesUngapped: the best-scoring stretch of an ungapped
    alignment of `length` pairs from query[q_first] and subject[s_first], scored with the
    true letters; a stretch before a drop below zero is dropped unless it reached `cutoff`.
    Returns (keep: the score reaches cutoff, score, the pairs skipped before the stretch,
    the stretch's length)."""
    total = 0
    score = 0
    best_start = 0
    best_end = 0
    current_start = 0
    for i in range(length):
        total += matrix[query[q_first + i] & 15, subject[s_first + i]]
        if total < 0:
            total = 0
            current_start = i + 1
            if score < cutoff:
                # the part before never reached the cutoff: it is dropped
                best_start = best_end = i + 1
                score = 0
        elif total > score:
            score = total
            best_end = i + 1
            best_start = current_start
    return score >= cutoff, score, best_start, best_end - best_start
