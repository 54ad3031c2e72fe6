"""Traceback: alignments with edit scripts on the subject's true letters.

Blast_TracebackFromHSPList for one subject (and one query batch), both of its nucleotide
paths: greedy (megablast) and X-drop dynamic programming (blastn, dc-megablast, blastn-short).

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

With a GPU, each greedy alignment's search was made ahead, score-only (engine.tails_ahead):
the aligner here stops at the best distance it found instead of going on until the X-drop
ends the search, and takes the letters that search read for the fence test. Each DP
alignment was made ahead whole (dp_traceback.cu): taken where its start point is the one
found here.
"""

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .alphabet import COMPLEMENT_BLASTNA, score_matrix
from .arrays import grown
from .db.reader import CODE_OF, fill_ranges
from .dynprog import MAX_SUBJECT_OFFSET, MAX_TOTAL_GAPS, adjust_subject_range, gapped_offsets, \
    gapped_start_nucl, traceback_dp_in
from .greedy import greedy_alignment_from_runs, greedy_gapped_alignment
from .hsp import Hsps, alloc_tree, count_identities, \
    containment_keep, hsp_rows, hsps_from_rows, max_hsps_candidates, purge_rows, ranked_order, \
    rows_by_score, reevaluate_with_ambiguities, score_order, score_order_rows, take_rows, \
    tree_add, tree_contains
from .layouts import HSP_CONTEXT, HSP_FIELDS, HSP_Q_END, HSP_Q_GAPPED_START, HSP_Q_START, \
    HSP_SCORE, HSP_S_END, HSP_S_GAPPED_START, HSP_S_START, RUN_COUNT_SHIFT, RUN_OP_MASK, \
    SCRIPT_RUNS, TAIL_DISTANCES, TAIL_EXTENTS, TAIL_FIELDS, TAIL_READ, TAIL_RUNS, TAIL_START, \
    TRACE_EXTENTS, TRACE_FIELDS, TRACE_READ, TRACE_RUNS, TRACE_SCORE, TRACE_START
from .numba_start import njit
from .output.tabular import COUNT_FIELDS, counts_of_all
from .refcounts import borrowed
from .stats import EVALUE_EQUAL_BELOW, evalue_and_bits

SPAN_MARGIN = 64  # letters read beyond an alignment's window: words and edit-script tidying
# letters unpacked on either side of each preliminary HSP for its traceback, as BLAST's partial
# fetching (BLAST_SEQSRC_OVERHANG): the final alignment seldom reads further
FETCH_MARGIN = 1024


def traceback_subject(hsps: Hsps, batch, subject_codes: np.ndarray, stats, options) -> Hsps:
    """Traced HSPs of one subject: the preliminary `hsps` (whole-subject coordinates),
    aligned on `subject_codes` (the subject's blastna letters, ambiguity codes included).
    Uses stats.gapped_cutoff[context], stats.gap_xdrop_final and options' scoring, task
    (options.greedy picks the aligner), min_diag_separation and perc_identity.  Returns
    HSPs sorted by score with edit scripts; E-values and bit scores are left to the
    caller."""
    if len(hsps) == 0:
        return Hsps.empty()
    _, rows, op_start, ops, op_len, _, _ = _traceback_rows(
        *_traceback_args(hsps, batch, subject_codes, stats, options), *_fresh_workspaces())
    traced = hsps_from_rows(rows)
    traced.op_start, traced.ops, traced.op_len = op_start, ops, op_len
    return traced


def traceback_final(hsps: Hsps, batch, query_codes: np.ndarray, subject_codes: np.ndarray,
                    stats, options, spans: np.ndarray | None = None,
                    ahead: np.ndarray | None = None,
                    ahead_runs: np.ndarray | None = None) -> Hsps | None:
    """traceback_subject, then BLAST's final steps for one subject: E-values and bit scores,
    the E-value threshold and the E-value order (max_hsps and the query coverage test come
    later: _final_args); with each HSP's alignment counts (hsps.counts, for the output),
    counted on the query's letters `query_codes`. All in one compiled call. With `spans`
    (letter_spans), only the letters in them are true: None is returned when an alignment
    read outside them (BLAST's fence hit), and the traceback must be redone with more
    letters. `ahead`: the greedy searches made ahead for the HSPs in score order
    (TAIL_FIELDS columns and a done flag, as GpuBackend.greedy_tails gives them), which each
    greedy traceback stops at, or takes the edit runs of (`ahead_runs`, where made)."""
    if len(hsps) == 0:
        return Hsps.empty()
    complete, rows, op_start, ops, op_len, evalue, bitscore, counts, _, _ = \
        _traceback_final_rows(
            *_traceback_args(hsps, batch, subject_codes, stats, options, spans, ahead,
                             ahead_runs),
            *_final_args(stats, options), np.ascontiguousarray(query_codes, dtype=np.uint8),
            COMPLEMENT_BLASTNA, *_fresh_workspaces())
    if not complete:
        return None
    return _final_hsps(rows, op_start, ops, op_len, evalue, bitscore, counts)


def _fresh_workspaces() -> tuple:
    """ALIGN_EX's workspaces (dynprog.align_ex_in) for one traceback call: empty, made as
    its first alignment needs them."""
    return np.empty(0, dtype=np.uint8), np.empty(0, dtype=np.int32)


def _final_hsps(rows, op_start, ops, op_len, evalue, bitscore, counts) -> Hsps:
    final = hsps_from_rows(rows)
    final.op_start, final.ops, final.op_len = op_start, ops, op_len
    final.evalue, final.bitscore, final.counts = evalue, bitscore, counts
    return final


def traceback_group(hsps_list: list, subjects: list, query_index: list, packed, batch, stats,
                    options, scratch: np.ndarray, tails_list: list | None = None) -> tuple:
    """traceback_final for the HSPs of many subjects of one volume (`packed`, its
    PackedSubjects), all in one compiled call: each of `hsps_list` against volume subject
    subjects[i] (a local index), with the letters of the batch's query query_index[i]. Each
    subject's letters are unpacked into `scratch` (a buffer at least as long as the longest
    subject, reused: letters outside what was unpacked are left from before), as BLAST's
    partial fetching: around the HSPs, and, when an alignment read outside them, around
    every letter it may read (letter_spans). Returns the final Hsps of each, and how many
    tracebacks were redone with more letters. `tails_list`: each one's TailsAhead, or None
    where none were made."""
    width = 2 * SCRIPT_RUNS if options.greedy else 1
    task_rows, rows, task_ahead, all_ahead, all_runs = _group_rows(hsps_list, tails_list,
                                                                   width, options.greedy)
    final = _trace_group(
        np.asarray(subjects, dtype=np.int64), np.asarray(query_index, dtype=np.int64),
        task_rows, rows, task_ahead, all_ahead, all_runs, *packed, CODE_OF,
        *batch.query_letters,
        *_batch_args(batch), *_scoring_args(stats, options), *_final_args(stats, options),
        COMPLEMENT_BLASTNA, FETCH_MARGIN, scratch)
    task_start, rows, op_start, ops, op_len, evalue, bitscore, counts, redone = final
    return _split_by_task(task_start, rows, op_start, ops, op_len, evalue, bitscore,
                          counts), int(redone)


def _group_rows(hsps_list: list, tails_list: list | None, width: int, greedy: bool) -> tuple:
    """The group's tasks' HSP rows in score order and their searches made ahead, laid end to
    end as _trace_group takes them: (task_rows, rows, task_ahead, ahead, runs). Without
    searches made ahead (the CPU's), the rows of all tasks come from a few numpy calls: a
    group of short reads holds thousands of tasks, and the calls per task, under the GIL,
    took longer than their tracebacks (docs/perf/traceback.md)."""
    if tails_list is None or all(tails is None for tails in tails_list):
        none_ahead, no_runs = _ahead_and_runs(None, None, width)
        return (_starts(hsps_list), rows_by_score(hsps_list),
                np.zeros(len(hsps_list) + 1, dtype=np.int64), none_ahead, no_runs)
    rows, ahead, runs = zip(*(_rows_and_ahead(h, t, width)
                              for h, t in zip(hsps_list, tails_list)))
    all_ahead = np.concatenate(ahead)
    if not greedy:
        # a DP alignment's runs are counted from its subject's first: from the group's now
        all_ahead[:, TRACE_RUNS] += np.repeat(_starts(runs)[:-1], [len(a) for a in ahead])
    return _starts(rows), np.concatenate(rows), _starts(ahead), all_ahead, np.concatenate(runs)


def _split_by_task(task_start, rows, op_start, ops, op_len, evalue, bitscore, counts) -> list:
    """One Hsps per task, a span of the group's final HSPs (its fields made when first
    read): a search's groups split into thousands of (query, subject) pairs, under the
    GIL."""
    whole = Hsps(*np.ascontiguousarray(rows[:, :HSP_FIELDS].T, dtype=np.int32))
    whole.op_start, whole.ops, whole.op_len = op_start, ops, op_len
    whole.evalue, whole.bitscore, whole.counts = evalue, bitscore, counts
    starts = task_start.tolist()
    return [whole.span(a, b) for a, b in zip(starts[:-1], starts[1:])]


def _starts(arrays) -> np.ndarray:
    """Where each of `arrays` starts once they are concatenated, and the end: int64."""
    starts = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([len(a) for a in arrays], out=starts[1:])
    return starts


# _trace_group's arguments as traceback_group passes them (compile_ahead's notation; the
# aligner is dp_traceback's type), for compiling it in a second process while a first search
# compiles the stages before it. A test checks them against a search's own call.
TRACE_GROUP_ARGUMENTS = (
    "i64[1] i64[1] i64[1] i64[2] i64[1] i64[2] u32[2] u8[1]r i64[1] i64[1] i64[1]r i64[1]r "
    "i64[1]r i64[1] u8[1]r u8[1] u8[1] i64[1] i64[1] i64[1] u8[1] u8[1] i64[2] {aligner} "
    "i64 i64 i64 i64 i64 i64 f64 i64[1] f64[1] f64[1] i64[1] bool f64 i64 u8[1] i64 u8[1]")


def trace_group_arguments(greedy: bool) -> str:
    """TRACE_GROUP_ARGUMENTS for the task's aligner (dp_traceback: None, or True)."""
    return TRACE_GROUP_ARGUMENTS.format(aligner="none" if greedy else "bool")


@njit(cache=True, nogil=True)
def _trace_group(task_subject, task_query, task_rows, rows, task_ahead, ahead, ahead_runs,
                 packed, byte_offset, lengths, amb_start, amb_offset, amb_length, amb_end,
                 amb_code, code_of, query_codes, query_start, context_offset, context_length,
                 query, unmasked, matrix, dp_traceback, xdrop, reward, penalty, gap_open,
                 gap_extend,
                 min_diag, perc_identity, cutoffs, lambdas, log_ks, searchsp, round_down,
                 evalue_max, max_hsps, complement, fetch_margin, scratch):
    """traceback_group's loop. Task i: volume subject task_subject[i], query
    task_query[i] (its letters query_codes[query_start[q]:query_start[q + 1]]), HSP rows
    task_rows[i]:task_rows[i + 1] of `rows` (score order), searches made ahead
    task_ahead[i]:task_ahead[i + 1]. Returns task_start [t + 1] (each task's final HSPs),
    then the final HSPs of all, as _traceback_final_rows gives them, and the count of
    tracebacks redone. A greedy search made ahead has its edit runs in its row of
    ahead_runs; a DP alignment's lie in the column ahead_runs[:, 0], from its TRACE_RUNS on."""
    # the volume, the queries and the scoring are shared by the threads: slices and calls
    # counting them in and out per task would bounce their counts' cache lines between the
    # cores (nothing borrowed is returned: the results are copied out)
    packed, query_codes, query, unmasked = borrowed(packed), borrowed(query_codes), \
        borrowed(query), borrowed(unmasked)
    matrix, context_offset, context_length = borrowed(matrix), borrowed(context_offset), \
        borrowed(context_length)
    rows, ahead, ahead_runs, scratch = borrowed(rows), borrowed(ahead), borrowed(ahead_runs), \
        borrowed(scratch)
    tasks = task_subject.size
    total = task_rows[tasks]
    task_start = np.zeros(tasks + 1, dtype=np.int64)
    out_rows = np.empty((total, HSP_FIELDS), dtype=np.int64)
    op_start = np.zeros(total + 1, dtype=np.int64)
    ops = np.empty(1024, dtype=np.uint8)
    op_len = np.empty(1024, dtype=np.int32)
    evalue = np.empty(total, dtype=np.float64)
    bitscore = np.empty(total, dtype=np.float64)
    counts = np.empty((total, COUNT_FIELDS), dtype=np.int64)
    redone = 0
    k = 0
    # ALIGN_EX's workspaces, kept from one task's alignments to the next task's
    cells, band = np.empty(0, dtype=np.uint8), np.empty(0, dtype=np.int32)
    for i in range(tasks):
        local = task_subject[i]
        length = lengths[local]
        subject = scratch[:length]
        bases = packed[byte_offset[local]:byte_offset[local] + (length + 3) // 4]
        a, b = amb_start[local], amb_start[local + 1]
        task_hsps = rows[task_rows[i]:task_rows[i + 1]]
        task_ahead_rows = ahead[task_ahead[i]:task_ahead[i + 1]]
        q = task_query[i]
        letters = query_codes[query_start[q]:query_start[q + 1]]
        runs_from, runs_to = (task_ahead[i], task_ahead[i + 1]) if dp_traceback is None \
            else (0, ahead_runs.shape[0])
        for attempt in range(2):
            redone += attempt
            spans = letter_spans(task_hsps, task_ahead_rows, context_length, length,
                                 fetch_margin, attempt == 1)
            fill_ranges(subject, 0, spans, bases, amb_offset[a:b], amb_length[a:b],
                        amb_end[a:b], amb_code[a:b], code_of)
            complete, f_rows, f_start, f_ops, f_len, f_evalue, f_bits, f_counts, cells, band = \
                _traceback_final_rows(
                    task_hsps, context_offset, context_length, query, unmasked, subject,
                    matrix, dp_traceback, xdrop, reward, penalty, gap_open, gap_extend, min_diag,
                    perc_identity, cutoffs, spans, task_ahead_rows,
                    ahead_runs[runs_from:runs_to], lambdas, log_ks, searchsp,
                    round_down, evalue_max, max_hsps, letters, complement, cells, band)
            if complete:
                break
        n = f_rows.shape[0]
        out_rows[k:k + n] = f_rows
        evalue[k:k + n] = f_evalue
        bitscore[k:k + n] = f_bits
        counts[k:k + n] = f_counts
        used = op_start[k]
        if used + f_ops.size > ops.size:
            ops = grown(ops, used + f_ops.size)
            op_len = grown(op_len, used + f_ops.size)
        ops[used:used + f_ops.size] = f_ops
        op_len[used:used + f_ops.size] = f_len
        for h in range(n):
            op_start[k + h + 1] = used + f_start[h + 1]
        k += n
        task_start[i + 1] = k
    used = op_start[k]
    return task_start, out_rows[:k].copy(), op_start[:k + 1].copy(), ops[:used].copy(), \
        op_len[:used].copy(), evalue[:k].copy(), bitscore[:k].copy(), counts[:k].copy(), redone


@njit(cache=True, nogil=True)
def letter_spans(rows, ahead, context_length, subject_length, fetch_margin, every_read):
    """The subject letters a traceback of HSP rows (hsp_rows, score order) unpacks: int64
    [k, 2] ranges, in order, disjoint. A subject shorter than MAX_SUBJECT_OFFSET is aligned
    whole. On a longer one, first (not every_read) as BLAST's partial fetching: each HSP's
    range and `fetch_margin` letters either side; for an HSP whose search was made ahead
    (`ahead`, a row per HSP, or none), its range and the letters that search read,
    SPAN_MARGIN more either side. After an alignment read outside those (BLAST's fence
    hit), every letter the tracebacks may read: each read stays in AdjustSubjectRange's
    window around the HSP's start point (which lies in the HSP), the context's length plus
    MAX_TOTAL_GAPS on either side of it, and a few letters more for the word-wide reads of
    the greedy aligner."""
    if subject_length < MAX_SUBJECT_OFFSET:
        whole = np.empty((1, 2), dtype=np.int64)
        whole[0, 0] = 0
        whole[0, 1] = subject_length
        return whole
    n = rows.shape[0]
    starts = np.empty(n, dtype=np.int64)
    ends = np.empty(n, dtype=np.int64)
    made_ahead = ahead.shape[0] == n
    for i in range(n):
        if every_read:
            reach = context_length[rows[i, HSP_CONTEXT]] + MAX_TOTAL_GAPS + SPAN_MARGIN
            starts[i] = rows[i, HSP_S_START] - reach
            ends[i] = rows[i, HSP_S_END] + reach
        elif made_ahead and ahead[i, TAIL_FIELDS] != 0:
            starts[i] = min(rows[i, HSP_S_START], ahead[i, TAIL_READ]) - SPAN_MARGIN
            ends[i] = max(rows[i, HSP_S_END], ahead[i, TAIL_READ + 1]) + SPAN_MARGIN
        else:
            starts[i] = rows[i, HSP_S_START] - fetch_margin
            ends[i] = rows[i, HSP_S_END] + fetch_margin
    return _merged(starts, ends, subject_length)


@njit(cache=True, nogil=True)
def _merged(starts, ends, subject_length):
    """The ranges [starts[i], ends[i]) cut to the subject and merged where they overlap or
    touch: int64 [k, 2], in order, disjoint."""
    order = np.argsort(starts, kind="mergesort")
    spans = np.empty((starts.size, 2), dtype=np.int64)
    k = -1
    for i in order:
        start = min(max(starts[i], 0), subject_length)
        end = min(max(ends[i], 0), subject_length)
        if k >= 0 and start <= spans[k, 1]:
            spans[k, 1] = max(spans[k, 1], end)
        else:
            k += 1
            spans[k, 0] = start
            spans[k, 1] = end
    return spans[:k + 1].copy()


def _traceback_args(hsps: Hsps, batch, subject_codes, stats, options, spans=None,
                    ahead=None, ahead_runs=None) -> tuple:
    """_traceback_rows' arguments: the HSPs as rows in score order, the batch, the subject,
    the scoring, the spans of true letters, the searches made ahead and their edit runs."""
    if spans is None:
        spans = np.array([[0, len(subject_codes)]], dtype=np.int64)
    rows = _score_rows(hsps)
    ahead, ahead_runs = _ahead_and_runs(ahead, ahead_runs)
    return (rows, *_batch_args(batch), np.ascontiguousarray(subject_codes, dtype=np.uint8),
            *_scoring_args(stats, options), np.ascontiguousarray(spans, dtype=np.int64),
            ahead, ahead_runs)


def _score_rows(hsps: Hsps) -> np.ndarray:
    """The HSPs as rows in score order (hsp_rows(h)[score_order(h)])."""
    return hsp_rows(hsps)[score_order(hsps)]


def _ahead_and_runs(ahead, ahead_runs, width: int = 2 * SCRIPT_RUNS) -> tuple:
    """A traceback's searches made ahead and their edit runs as the aligners take them:
    none made gives no rows; greedy searches without their edit runs are searched again.
    `width`: the runs' columns (2 * SCRIPT_RUNS for greedy searches, 1 for DP alignments)."""
    if ahead is None:
        ahead = NOTHING_AHEAD
    if ahead_runs is None:  # searches without their edit runs: the CPU searches again
        ahead = ahead.copy()
        ahead[:, TAIL_RUNS:TAIL_RUNS + 2] = -1
        ahead_runs = np.zeros((ahead.shape[0] if width > 1 else 0, width), dtype=np.uint32)
    return np.ascontiguousarray(ahead, dtype=np.int64), \
        np.ascontiguousarray(ahead_runs, dtype=np.uint32)


@dataclass(frozen=True)
class TailsAhead:
    """The traceback's alignments of one subject's preliminary HSPs, made ahead of the
    traceback (Engine.tails_ahead): the HSPs as rows in score order
    (hsp_rows(h)[score_order(h)]), an alignment per row and their edit runs. Greedy
    searches (GpuBackend.greedy_tails): TAIL_FIELDS columns and a done flag, the runs a
    row of 2 * SCRIPT_RUNS each. DP alignments (GpuBackend.dp_tails, dp_tails_ahead):
    TRACE_FIELDS columns and a done flag, the runs one column (uint32 [k, 1]), an
    alignment's from its TRACE_RUNS on."""

    rows: np.ndarray
    searches: np.ndarray
    runs: np.ndarray


def trace_cells(rows: np.ndarray, xdrop: int, gap_extend: int) -> np.ndarray:
    """At least how many cells each HSP's DP traceback computes: a row per query letter of
    its preliminary extent, each at least as wide as a gap the X-drop lets run."""
    return (rows[:, HSP_Q_END] - rows[:, HSP_Q_START]) * (xdrop // max(gap_extend, 1))


def dp_reach(rows: np.ndarray, subject_length: np.ndarray,
             context_length: np.ndarray) -> np.ndarray:
    """Every subject letter the DP traceback of each HSP row may read: int64 [n, 2]. The
    whole subject when it is shorter than MAX_SUBJECT_OFFSET, else AdjustSubjectRange's
    window: the start point stays on the HSP's stored diagonal, and the window reaches its
    context's length plus MAX_TOTAL_GAPS from it."""
    diagonal = rows[:, HSP_S_GAPPED_START] - rows[:, HSP_Q_GAPPED_START]
    span = context_length[rows[:, HSP_CONTEXT]] + MAX_TOTAL_GAPS
    short = subject_length < MAX_SUBJECT_OFFSET
    start = np.where(short, 0, np.maximum(diagonal - MAX_TOTAL_GAPS, 0))
    end = np.where(short, subject_length, np.minimum(diagonal + span, subject_length))
    return np.stack([start, np.maximum(end, start)], axis=1).astype(np.int64)


def dp_tails_ahead(rows: np.ndarray, searches: np.ndarray, runs: np.ndarray, ends: list) -> list:
    """A launch's DP alignments (GpuBackend.dp_tails: `searches`, a row per HSP row, and the
    launch's runs) as a TailsAhead for each subject, whose rows end at `ends`: each with its
    own runs, its TRACE_RUNS counted from the first of them."""
    made = searches[:, TRACE_FIELDS] != 0
    count = np.where(made, searches[:, TRACE_RUNS + 1], 0)
    start = np.zeros(count.size + 1, dtype=np.int64)
    np.cumsum(count, out=start[1:])
    # each made alignment's runs, in row order
    gathered = runs[np.repeat(searches[:, TRACE_RUNS] - start[:-1], count) +
                    np.arange(int(start[-1]))].reshape(-1, 1)
    firsts = [0] + ends[:-1]
    subject_first = np.repeat(start[firsts], np.diff([0] + ends))
    searches = searches.copy()
    searches[:, TRACE_RUNS] = np.where(made, start[:-1] - subject_first, 0)
    return [TailsAhead(rows[first:last], searches[first:last],
                       gathered[start[first]:start[last]])
            for first, last in zip(firsts, ends)]


def _rows_and_ahead(hsps: Hsps, tails: TailsAhead | None, width: int = 2 * SCRIPT_RUNS) -> tuple:
    """A subject's HSPs as rows in score order, with their alignments made ahead (a row per
    HSP, or none) and edit runs (`width` columns, as _ahead_and_runs)."""
    if tails is None or tails.searches.shape[0] != len(hsps):
        return (_score_rows(hsps) if tails is None else tails.rows,
                *_ahead_and_runs(None, None, width))
    return tails.rows, *_ahead_and_runs(tails.searches, tails.runs, width)


def _batch_args(batch) -> tuple:
    """The query batch as the aligners take it: contexts' offsets and lengths, the masked
    and the unmasked letters."""
    return (np.ascontiguousarray(batch.context_offset, dtype=np.int64),
            np.ascontiguousarray(batch.context_length, dtype=np.int64),
            np.ascontiguousarray(batch.sequence, dtype=np.uint8),
            np.ascontiguousarray(batch.unmasked_sequence, dtype=np.uint8))


def _scoring_args(stats, options) -> tuple:
    """The traceback's scoring: matrix, aligner (dp_traceback), X-drop, costs, separation,
    identity and the contexts' cutoffs."""
    # the aligner: None for the greedy one, so that numba leaves the DP path out of a
    # megablast search's compiled code (it prunes a branch on an argument that is None)
    return (_matrix(int(options.reward), int(options.penalty)),
            None if options.greedy else True,
            int(stats.gap_xdrop_final), int(options.reward), int(options.penalty),
            int(options.gapopen), int(options.gapextend), int(options.min_diag_separation),
            float(options.perc_identity),
            np.ascontiguousarray(stats.gapped_cutoff, dtype=np.int64))


def _final_args(stats, options) -> tuple:
    """traceback_final's E-value statistics, threshold and max_hsps. max_hsps and the
    query coverage test come after the subjects' final order and the cut to
    max_target_seqs (engine.query_results), as in blastn, whose ranking keeps each
    subject's best E-value from before them; here only the HSPs max_hsps can keep stay
    (max_hsps_candidates), unless culling or the best-hit filter, which see every HSP,
    come first."""
    from .hspfilters import has_query_filter

    return (np.ascontiguousarray(stats.lambdas, dtype=np.float64),
            np.ascontiguousarray(stats.log_ks, dtype=np.float64),
            np.ascontiguousarray(stats.eff_searchsp, dtype=np.int64), bool(stats.round_down),
            float(options.evalue),
            0 if has_query_filter(options) else int(options.max_hsps or 0))


@njit(cache=True, nogil=True)
def _traceback_final_rows(rows, context_offset, context_length, query, unmasked, subject,
                          matrix, dp_traceback, xdrop, reward, penalty, gap_open, gap_extend,
                          min_diag, perc_identity, cutoffs, spans, ahead, ahead_runs, lambdas,
                          log_ks,
                          searchsp, round_down, evalue_max, max_hsps, query_codes, complement,
                          cells, band):
    """_traceback_rows, then traceback_final's steps. Returns complete, rows, op_start, ops,
    op_len, evalue, bitscore, counts [n, 4] (nothing when not complete), and ALIGN_EX's
    workspaces `cells` and `band` (as _traceback_rows)."""
    complete, rows, op_start, ops, op_len, cells, band = _traceback_rows(
        rows, context_offset, context_length, query, unmasked, subject, matrix, dp_traceback,
        xdrop,
        reward, penalty, gap_open, gap_extend, min_diag, perc_identity, cutoffs, spans, ahead,
        ahead_runs, cells, band)
    n = rows.shape[0]
    evalue = np.empty(n, dtype=np.float64)
    bitscore = np.empty(n, dtype=np.float64)
    for i in range(n):
        evalue[i], bitscore[i] = evalue_and_bits(rows[i, HSP_SCORE], rows[i, HSP_CONTEXT],
                                                  lambdas, log_ks, searchsp, round_down)
    index = np.flatnonzero(evalue <= evalue_max)
    # ScoreCompareHSPs with E-values: E-value (tiny ones equal), then as score_order
    shown = evalue[index]
    shown[shown < EVALUE_EQUAL_BELOW] = 0.0
    index = max_hsps_candidates(rows, index[ranked_order(rows, index, shown)], max_hsps)
    rows, op_start, ops, op_len = take_rows(rows, op_start, ops, op_len, index)
    counts = counts_of_all(query_codes, rows[:, HSP_CONTEXT].copy(), rows[:, HSP_Q_START].copy(),
                           rows[:, HSP_Q_END].copy(), rows[:, HSP_S_START].copy(), subject,
                           op_start, ops, op_len, complement)
    return complete, rows, op_start, ops, op_len, evalue[index], bitscore[index], counts, \
        cells, band


@njit(cache=True, nogil=True)
def _traceback_rows(rows, context_offset, context_length, query, unmasked, subject, matrix,
                    dp_traceback, xdrop, reward, penalty, gap_open, gap_extend, min_diag,
                    perc_identity, cutoffs, spans, ahead, ahead_runs, cells, band):
    """The whole of traceback_subject in one compiled call (no Python between the steps, so
    the traceback threads hardly need the GIL). rows: int64 [n, HSP_FIELDS] (hsp_rows), in score
    order; the subject's letters are true in `spans` only; `ahead` as traceback_final's
    (no rows: none), with ahead_runs its edit runs. Returns complete (no alignment
    read outside the spans), then the final rows and their edit scripts: rows, op_start,
    ops, op_len (none when not complete), then ALIGN_EX's workspaces to pass next time
    (`cells`, `band`: dynprog.align_ex_in's, of any size; untouched by the greedy
    aligner). dp_traceback: None for the greedy aligner, True for DP."""
    if dp_traceback is None:
        complete, rows, op_start, ops, op_len = _greedy_traceback_rows(
            rows, context_offset, context_length, query, subject, matrix, xdrop, reward,
            penalty, gap_open, gap_extend, min_diag, spans, ahead, ahead_runs)
    else:
        complete, rows, op_start, ops, op_len, cells, band = _dp_traceback_rows(
            rows, context_offset, context_length, query, unmasked, subject, matrix, gap_open,
            gap_extend, xdrop, min_diag, perc_identity, spans, ahead, ahead_runs, cells, band)
    if rows.shape[0] == 0:
        return complete, rows, op_start, ops, op_len, cells, band
    # step 3: common endpoints trimmed, then rescoring with ambiguities: every HSP after a
    # greedy traceback (the greedy aligner ignored ambiguities), the trimmed ones after DP
    rows, op_start, ops, op_len, first_trimmed = purge_rows(rows, op_start, ops, op_len,
                                                             False)
    rows, op_start, ops, op_len = _rescore_rows(
        rows, op_start, ops, op_len, 0 if dp_traceback is None else first_trimmed,
        context_offset,
        context_length, query, unmasked, subject, matrix, reward, penalty, gap_open,
        gap_extend, cutoffs, perc_identity)
    # step 4
    rows, op_start, ops, op_len, _ = purge_rows(rows, op_start, ops, op_len, True)
    order = score_order_rows(rows)
    rows, op_start, ops, op_len = take_rows(rows, op_start, ops, op_len, order)
    keep = np.flatnonzero(containment_keep(rows, min_diag))
    rows, op_start, ops, op_len = take_rows(rows, op_start, ops, op_len, keep)
    return True, rows, op_start, ops, op_len, cells, band


# blastna subjects are compared with the query's letters, not its packed words
NO_WORDS = (np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.uint8))
NOTHING_AHEAD = np.zeros((0, TAIL_FIELDS + 1), dtype=np.int64)


@lru_cache(maxsize=16)
def _matrix(reward: int, penalty: int) -> np.ndarray:
    """The scoring matrix as the aligners take it, built once per reward/penalty pair and
    shared by all threads (nothing writes to it)."""
    return score_matrix(reward, penalty).astype(np.int64)


@njit(cache=True, nogil=True)
def _greedy_traceback_rows(rows_in, context_offset, context_length, query, subject, matrix,
                           xdrop, reward, penalty, gap_open, gap_extend, min_diag, spans,
                           ahead, ahead_runs):
    """Containment test, start point (BlastGetStartForGappedAlignmentNucl, or
    BlastGetOffsetsForGappedAlignment without one), then BLAST_GreedyGappedAlignment with
    traceback in the subject window of AdjustSubjectRange, for each HSP in order. rows_in:
    int64 [n, HSP_FIELDS] (hsp_rows). Returns complete (every alignment read only letters
    inside `spans`; if not, the loop stops), the traced rows [k, HSP_FIELDS] (whole-subject
    coordinates) and their edit scripts: op_start [k + 1], ops, op_len. A search made ahead
    (`ahead`, a row per HSP) from the same start point gives the distances where the aligner
    stops and the letters the whole search read, or, with its edit runs, the alignment
    itself."""
    n = rows_in.shape[0]
    rows = np.empty((n, HSP_FIELDS), dtype=np.int64)
    op_start = np.zeros(n + 1, dtype=np.int64)
    ops = np.empty(256, dtype=np.uint8)
    op_len = np.empty(256, dtype=np.int32)
    tree = alloc_tree(n, min_diag)
    held = 0
    kept = 0
    for i in range(n):
        ctx = rows_in[i, HSP_CONTEXT]
        qs = rows_in[i, HSP_Q_START]
        qe = rows_in[i, HSP_Q_END]
        ss = rows_in[i, HSP_S_START]
        se = rows_in[i, HSP_S_END]
        qg = rows_in[i, HSP_Q_GAPPED_START]
        sg = rows_in[i, HSP_S_GAPPED_START]
        if tree_contains(tree, held, ctx, qs, qe, ss, se, rows_in[i, HSP_SCORE], min_diag):
            continue
        q_base = context_offset[ctx]
        q_length = context_length[ctx]
        letters = query[q_base:q_base + q_length]
        if qg == 0 and sg == 0:
            found, qg, sg = gapped_offsets(letters, subject, matrix, qs, qe, ss, se)
            if not found:
                continue
        else:
            qg, sg = gapped_start_nucl(letters, subject, qs, qe, ss, se, qg, sg)
        shift, s_in_window, window = adjust_subject_range(sg, subject.size, qg, q_length)
        known = ahead.shape[0] == n and ahead[i, TAIL_FIELDS] != 0 and \
            ahead[i, TAIL_START] == qg and ahead[i, TAIL_START + 1] == sg
        if known and ahead[i, TAIL_RUNS] >= 0:
            read_start = ahead[i, TAIL_READ]
            read_end = ahead[i, TAIL_READ + 1]
            e = TAIL_EXTENTS
            score, q0, q1, s0, s1, script, lens, n_ops = greedy_alignment_from_runs(
                query, q_base, subject, shift, qg, s_in_window, reward, penalty,
                ahead[i, TAIL_DISTANCES], ahead[i, TAIL_DISTANCES + 1], ahead[i, e],
                ahead[i, e + 1], ahead[i, e + 2], ahead[i, e + 3], ahead_runs[i],
                ahead[i, TAIL_RUNS], ahead[i, TAIL_RUNS + 1], SCRIPT_RUNS)
        else:
            res = greedy_gapped_alignment(query, NO_WORDS, q_base, q_length, subject, shift,
                                          window, False, qg, s_in_window, xdrop, reward, penalty,
                                          gap_open, gap_extend, True,
                                          ahead[i, TAIL_DISTANCES] if known else -1,
                                          ahead[i, TAIL_DISTANCES + 1] if known else -1)
            read_start = ahead[i, TAIL_READ] if known else res[10] + shift
            read_end = ahead[i, TAIL_READ + 1] if known else res[11] + shift
            score, q0, q1, s0, s1 = res[0], res[1], res[2], res[3], res[4]
            script, lens, n_ops = res[7], res[8], res[9]
        if not _within(spans, read_start, read_end):
            return False, rows[:0], op_start[:1], ops[:0], op_len[:0]
        ops, op_len = _append_traced(rows, op_start, ops, op_len, kept, ctx, q0, q1, s0 + shift,
                                     s1 + shift, score, qg, sg, script[:n_ops], lens[:n_ops])
        kept += 1
        held = tree_add(tree, held, ctx, q0, q1, s0 + shift, s1 + shift, score)
    used = op_start[kept]
    return True, rows[:kept].copy(), op_start[:kept + 1].copy(), ops[:used].copy(), \
        op_len[:used].copy()


@njit(cache=True, nogil=True)
def _dp_traceback_rows(rows_in, context_offset, context_length, query, unmasked, subject,
                       matrix, gap_open, gap_extend, xdrop, min_diag, perc_identity, spans,
                       ahead, ahead_runs, cells, band):
    """The loop of traceback_subject for DP: containment test, start point, ALIGN_EX from
    it, percent identity test (Blast_HSPTestIdentityAndLength, no minimum length), in
    order. rows_in: int64 [n, HSP_FIELDS] (hsp_rows). An alignment made ahead from the same
    start point (`ahead`, a row per HSP, or none; its runs in ahead_runs[:, 0]) is taken
    as made. Returns complete (as _greedy_traceback_rows), the kept rows [k, HSP_FIELDS]
    (start point updated) and their edit scripts: op_start [k + 1], ops, op_len; then
    ALIGN_EX's workspaces (`cells`, `band`: align_ex_in's), to pass to the next call."""
    n = rows_in.shape[0]
    rows = np.empty((n, HSP_FIELDS), dtype=np.int64)
    op_start = np.zeros(n + 1, dtype=np.int64)
    ops = np.empty(256, dtype=np.uint8)
    op_len = np.empty(256, dtype=np.int32)
    tree = alloc_tree(n, min_diag)
    held = 0
    kept = 0
    for i in range(n):
        ctx = rows_in[i, HSP_CONTEXT]
        qs = rows_in[i, HSP_Q_START]
        qe = rows_in[i, HSP_Q_END]
        ss = rows_in[i, HSP_S_START]
        se = rows_in[i, HSP_S_END]
        qg = rows_in[i, HSP_Q_GAPPED_START]
        sg = rows_in[i, HSP_S_GAPPED_START]
        if tree_contains(tree, held, ctx, qs, qe, ss, se, rows_in[i, HSP_SCORE], min_diag):
            continue
        q_base = context_offset[ctx]
        letters = query[q_base:q_base + context_length[ctx]]
        if qg == 0 and sg == 0:
            found, qg, sg = gapped_offsets(letters, subject, matrix, qs, qe, ss, se)
            if not found:
                continue
        else:
            qg, sg = gapped_start_nucl(letters, subject, qs, qe, ss, se, qg, sg)
        if ahead.shape[0] == n and ahead[i, TRACE_FIELDS] != 0 and \
                ahead[i, TRACE_START] == qg and ahead[i, TRACE_START + 1] == sg:
            score, read_start, read_end = ahead[i, TRACE_SCORE], ahead[i, TRACE_READ], \
                ahead[i, TRACE_READ + 1]
            q0, q1, s0, s1 = ahead[i, TRACE_EXTENTS], ahead[i, TRACE_EXTENTS + 1], \
                ahead[i, TRACE_EXTENTS + 2], ahead[i, TRACE_EXTENTS + 3]
            first = ahead[i, TRACE_RUNS]
            runs = ahead_runs[first:first + ahead[i, TRACE_RUNS + 1], 0]
            script = (runs & RUN_OP_MASK).astype(np.uint8)
            lens = (runs >> RUN_COUNT_SHIFT).astype(np.int32)
        else:
            score, q0, q1, s0, s1, script, lens, read_start, read_end, cells, band = \
                traceback_dp_in(cells, band, letters, qg, subject, sg, matrix, gap_open,
                                gap_extend, xdrop)
        if not _within(spans, read_start, read_end):
            return False, rows[:0], op_start[:1], ops[:0], op_len[:0], cells, band
        if script.size == 0:
            continue
        ident, length = count_identities(unmasked, q_base, subject, q0, s0, script, lens)
        if ident * 100.0 < length * perc_identity:  # s_HSPTest
            continue
        ops, op_len = _append_traced(rows, op_start, ops, op_len, kept,
                                     ctx, q0, q1, s0, s1, score, qg, sg, script, lens)
        kept += 1
        held = tree_add(tree, held, ctx, q0, q1, s0, s1, score)
    used = op_start[kept]
    return True, rows[:kept].copy(), op_start[:kept + 1].copy(), ops[:used].copy(), \
        op_len[:used].copy(), cells, band


@njit(cache=True, nogil=True)
def _within(spans, start, end):
    """Whether letters [start, end) lie inside one of `spans` (int64 [k, 2], in order,
    disjoint)."""
    k = np.searchsorted(spans[:, 1], start, side="right")
    return k < spans.shape[0] and spans[k, 0] <= start and end <= spans[k, 1]


@njit(cache=True, nogil=True)
def _append_traced(rows, op_start, ops, op_len, kept, ctx, q0, q1, s0, s1, score, qg, sg,
                   script, lens):
    """Store traced HSP number `kept` (its row and edit script) in the output arrays of a
    traceback loop; op_start[kept + 1] is set. Returns ops and op_len, grown if needed."""
    rows[kept, HSP_CONTEXT] = ctx
    rows[kept, HSP_Q_START] = q0
    rows[kept, HSP_Q_END] = q1
    rows[kept, HSP_S_START] = s0
    rows[kept, HSP_S_END] = s1
    rows[kept, HSP_SCORE] = score
    rows[kept, HSP_Q_GAPPED_START] = qg
    rows[kept, HSP_S_GAPPED_START] = sg
    start = op_start[kept]
    end = start + script.size
    if end > ops.size:
        ops = grown(ops, end)
        op_len = grown(op_len, end)
    ops[start:end] = script
    op_len[start:end] = lens
    op_start[kept + 1] = end
    return ops, op_len


@njit(cache=True, nogil=True)
def _rescore_rows(rows_in, op_start_in, ops_in, op_len_in, first, context_offset,
                  context_length, query, unmasked, subject, matrix, reward, penalty, gap_open,
                  gap_extend, cutoffs, perc_identity):
    """_rescore's loop in one compiled call: rows before `first` pass through; the others
    are rescored on the true letters and kept if above their context's cutoff and the
    percent identity. Returns rows [k, HSP_FIELDS] and edit scripts: op_start [k + 1], ops,
    op_len."""
    n = rows_in.shape[0]
    rows = np.empty((n, HSP_FIELDS), dtype=np.int64)
    op_start = np.zeros(n + 1, dtype=np.int64)
    ops = np.empty(max(16, ops_in.size), dtype=np.uint8)
    op_len = np.empty(max(16, ops_in.size), dtype=np.int32)
    kept = 0
    for i in range(n):
        script = ops_in[op_start_in[i]:op_start_in[i + 1]]
        lens = op_len_in[op_start_in[i]:op_start_in[i + 1]]
        row = rows_in[i].copy()
        if i >= first:
            ctx = row[HSP_CONTEXT]
            q_base = context_offset[ctx]
            keep, score, qs, qe, ss, se, first_run, last_run, last_num = \
                reevaluate_with_ambiguities(query, q_base, context_length[ctx], subject,
                                            row[HSP_Q_START], row[HSP_S_START], script, lens,
                                            matrix, reward, penalty, gap_open, gap_extend,
                                            cutoffs[ctx])
            if not keep:
                continue
            script = script[first_run:last_run + 1]
            lens = lens[first_run:last_run + 1].copy()
            lens[lens.size - 1] = last_num
            ident, length = count_identities(unmasked, q_base, subject, qs, ss, script, lens)
            if ident * 100.0 < length * perc_identity:  # s_HSPTest
                continue
            row[HSP_Q_START] = qs
            row[HSP_Q_END] = qe
            row[HSP_S_START] = ss
            row[HSP_S_END] = se
            row[HSP_SCORE] = score
        ops, op_len = _append_traced(rows, op_start, ops, op_len, kept, row[HSP_CONTEXT],
                                     row[HSP_Q_START], row[HSP_Q_END], row[HSP_S_START],
                                     row[HSP_S_END], row[HSP_SCORE], row[HSP_Q_GAPPED_START],
                                     row[HSP_S_GAPPED_START], script, lens)
        kept += 1
    used = op_start[kept]
    return rows[:kept].copy(), op_start[:kept + 1].copy(), ops[:used].copy(), \
        op_len[:used].copy()
