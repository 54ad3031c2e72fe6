"""X-drop dynamic-programming gapped extension for the blastn tasks (blastn, blastn-short).

What BLAST+ 2.12 does (spec §6.2 point 3, §6.3), reproduced cell for cell:

* **Preliminary, score only** (`prelim_dp_extend`): the extension starts from the ungapped
  seed, moved 3 letters right when the ungapped alignment reaches 8 or more letters past it,
  then rounded up to the next 4-base boundary of the packed subject. It extends left (the
  start letter included) and right with affine-gap X-drop DP, X = min(gap X-drop, ungapped
  score). The subject is read straight from its packed 2-bit bytes.
* **Traceback** (`traceback_dp`): the same DP, with an edit script, on the true (IUPAC)
  subject with the final X-drop: left from the start point (included), then right. Ties are
  broken as BLAST breaks them: a cell prefers the diagonal, then a gap in the subject (query
  letter against '-'), then a gap in the query; a running gap is extended rather than
  reopened when both score the same.
* `gapped_start_nucl`, `gapped_offsets`, `adjust_subject_range`: how the traceback (DP and
  greedy alike) picks its start point and its subject window.

Trimming an HSP that shares an end with a better one and rescoring it with the ambiguity
letters are HSP management, shared with the greedy path: `gblastn.hsp`.

Conventions of the DP kernels: a one-direction extension aligns ``M`` letters of a "row"
sequence with ``N`` letters of a "column" sequence; letter k (1-based) of either is
``seq[origin + step * k]`` (step +1 to the right, -1 to the left), so the same kernel runs
both ways without copying or reversing anything. Cell (a, b) is the best alignment ending
after a row letters and b column letters. Memory grows with the X-drop band, not with the
sequence lengths (as BLAST's, whose per-column arrays are indexed by column and grow on
demand).

All scores are raw; the matrix is BLAST's 16x16 blastna matrix (`alphabet.score_matrix`).
Coordinates are 0-based and ends exclusive (as in `gblastn.hsp`).
"""

import numpy as np

from .arrays import grown
from .layouts import CELL_EXTEND_GAP_IN_QUERY, CELL_EXTEND_GAP_IN_SUBJECT, CELL_OP_MASK, MININT, \
    OP_DEL, OP_INS, OP_SUB, PACK_RATIO
from .numba_start import njit
from .refcounts import borrowed

# Subjects at least this long are cut to a window around the traceback start point.
MAX_SUBJECT_OFFSET = 90000
# How many gap letters that window allows on top of the query length.
MAX_TOTAL_GAPS = 3000
# Window (letters) BlastGetOffsetsForGappedAlignment slides along an HSP.
HSP_MAX_WINDOW = 11



@njit(cache=True, nogil=True)
def _packed_base(packed, i):
    """Base i (0..3) of a packed 2-bit buffer, first base in the high bits."""
    return (packed[i >> 2] >> (2 * (3 - (i & 3)))) & 3


@njit(cache=True, nogil=True)
def _band_cells(x_dropoff, gap_extend, n):
    """How many cells past the band a row can add before a gap fails the X-drop test."""
    if gap_extend > 0:
        return x_dropoff // gap_extend + 3
    return n + 3


@njit(cache=True, nogil=True)
def _start_band(band, x_dropoff, gap_open_extend, gap_extend, n, extra, whole):
    """Row 0 (only gaps, until they fail the X-drop test) in the band workspace `band`
    (replaced by a larger one when too small for `extra` cells, or for all n columns when
    `whole`), ready for row 1.

    The workspace is int32, two per column: [2b] the best score of the column's cell in the
    previous row (BLAST's best), [2b + 1] the best one ending in a gap coming down that
    column (best_gap). Returns (workspace, b_size: the columns row 1 examines)."""
    cells = max(extra, n) if whole else extra
    if band.size < 2 * (cells + 100):
        band = np.empty(2 * (cells + 100), dtype=np.int32)
    score = -gap_open_extend
    band[0] = 0
    band[1] = -gap_open_extend
    i = 1
    while i <= n:
        if score < -x_dropoff:
            break
        band[2 * i] = score
        band[2 * i + 1] = score - gap_open_extend
        score -= gap_extend
        i += 1
    # row 0 ends at its last live cell, without the dead cell later rows end with: the
    # diagonal from that cell into row 1 is never looked at (BLAST's band does the same)
    return band, i


@njit(cache=True, nogil=True)
def xdrop_score(rows, row_origin, row_step, m, rows_packed,
                cols, col_origin, col_step, n,
                matrix, gap_open, gap_extend, x_dropoff):
    """Score-only X-drop DP in one direction (s_BlastAlignPackedNucl / Blast_SemiGappedAlign).

    rows: the row sequence, blastna codes, or packed 2-bit bytes when `rows_packed`;
    its letter k (1..m) is rows[row_origin + row_step * k] (base index when packed).
    cols: blastna codes, letter k (1..n) at cols[col_origin + col_step * k].
    x_dropoff is raised to gap_open + gap_extend, as BLAST does.
    Returns (best score, rows used, columns used) of the best cell, (0, 0, 0) when none
    beats the empty extension.
    """
    return xdrop_score_in(np.empty(0, dtype=np.int32), rows, row_origin, row_step, m,
                          rows_packed, cols, col_origin, col_step, n, matrix, gap_open,
                          gap_extend, x_dropoff)[:3]


@njit(cache=True, nogil=True)
def xdrop_score_in(band, rows, row_origin, row_step, m, rows_packed,
                   cols, col_origin, col_step, n,
                   matrix, gap_open, gap_extend, x_dropoff):
    """xdrop_score working in the int32 workspace `band` (any size; reused across calls
    to spare an allocation per extension). Returns (score, rows used, columns used,
    workspace): the workspace to pass next time (a larger one when it had to grow)."""
    gap_open_extend = gap_open + gap_extend
    if x_dropoff < gap_open_extend:
        x_dropoff = gap_open_extend
    if n <= 0 or m <= 0:
        return 0, 0, 0, band
    extra = _band_cells(x_dropoff, gap_extend, n)
    # sized for every column (a row's band never passes column n), as a workspace that
    # grew inside the row loop would be counted in and out (two atomic operations) a row
    band, b_size = _start_band(band, x_dropoff, gap_open_extend, gap_extend, n, extra, True)
    one = np.uint64(1)
    best_score = 0
    best_a = 0
    best_b = 0
    first_b = 0
    for a in range(1, m + 1):
        if rows_packed:
            row_letter = _packed_base(rows, row_origin + row_step * a)
        else:
            row_letter = rows[row_origin + row_step * a]
        # the row's scores read through the matrix itself: a view of the row would be
        # counted in and out (two calls into numba's runtime) every row
        matrix_row = np.uint64(row_letter)
        score = MININT
        score_gap_row = MININT
        last_b = first_b
        floor = best_score - x_dropoff  # a cell below it fails the X-drop test
        # Columns up to n - 1 read the next column's letter for the diagonal of the cell to
        # their right; column n has none, so its pass reads letter 1 and never uses it.
        # (Unsigned indices spare numba's negative-index fix-ups in this hottest loop.)
        col = col_origin + col_step * first_b
        step = col_step
        start = first_b
        stop = min(b_size, n)
        for part in range(2):
            for b in range(start, stop):
                u = np.uint64(2 * b)
                col += step
                score_gap_col = np.int64(band[u + one])
                letter = np.uint64(cols[np.uint64(col)])
                next_score = np.int64(band[u]) + matrix[matrix_row, letter]
                if score < score_gap_col:
                    score = score_gap_col
                # the row gap opened from the diagonal or column gap alone: opening it from
                # the row gap itself never wins (gap_open >= 0), and this keeps the cell's
                # maximum off the chain from one cell's row gap to the next one's
                open_row_gap = score - gap_open_extend
                if score < score_gap_row:
                    score = score_gap_row
                if score < floor:
                    # dead cell; a dead first cell moves the band's left edge
                    if b == first_b:
                        first_b += 1
                    else:
                        band[u] = MININT
                else:
                    last_b = b
                    if score > best_score:
                        best_score = score
                        best_a = a
                        best_b = b
                        floor = score - x_dropoff
                    open_gap = score - gap_open_extend
                    score_gap_col -= gap_extend
                    band[u + one] = open_gap if open_gap > score_gap_col else score_gap_col
                    score_gap_row -= gap_extend
                    if score_gap_row < open_row_gap:
                        score_gap_row = open_row_gap
                    band[u] = score
                score = next_score
            if stop == b_size:
                break
            col = col_origin + col_step
            step = 0
            start = stop
            stop = b_size

        if first_b == b_size:
            break
        if last_b < b_size - 1:
            b_size = last_b + 1
        else:
            # the row ended alive: open the band to the right while the row gap survives
            while score_gap_row >= best_score - x_dropoff and b_size <= n:
                band[2 * b_size] = score_gap_row
                band[2 * b_size + 1] = score_gap_row - gap_open_extend
                score_gap_row -= gap_extend
                b_size += 1
        if b_size <= n:
            band[2 * b_size] = MININT
            band[2 * b_size + 1] = MININT
            b_size += 1
    return best_score, best_a, best_b, band


@njit(cache=True, nogil=True)
def prelim_dp_extend(query, packed_subject, subject_length, seed_q, seed_s,
                     ungapped_s_start, ungapped_length, ungapped_score,
                     matrix, gap_open, gap_extend, gap_x_dropoff):
    """Preliminary score-only gapped extension of one ungapped HSP (s_BlastDynProgNtGappedAlignment).

    query: blastna codes of the HSP's context only (slice the concatenated buffer; the
        extension never leaves it).
    packed_subject: the subject's packed 2-bit bytes; subject_length its length in bases.
    seed_q, seed_s: the initial hit's offsets (BLAST's init_hsp q_off/s_off), seed_q
        context-relative.
    ungapped_s_start, ungapped_length, ungapped_score: the ungapped alignment of that hit.
    gap_x_dropoff: the raw preliminary gapped X-drop (blastn 33, blastn-short 15).
    The ungapped alignment must lie inside both sequences and hold the seed (as the
    ungapped stage guarantees); the start point then stays inside both.

    Returns (score, q_start, q_end, s_start, s_end, q_gapped_start, s_gapped_start): the
    gapped alignment's box (ends exclusive) and the start point to store in the HSP (the
    seed, moved +3 when it was; not the 4-base rounding, which BLAST keeps local).
    """
    res = prelim_dp_extend_in(np.empty(0, dtype=np.int32), query, packed_subject,
                              subject_length, seed_q, seed_s, ungapped_s_start,
                              ungapped_length, ungapped_score, matrix, gap_open, gap_extend,
                              gap_x_dropoff)
    return res[0], res[1], res[2], res[3], res[4], res[5], res[6]


@njit(cache=True, nogil=True)
def prelim_dp_extend_in(band, query, packed_subject, subject_length, seed_q, seed_s,
                        ungapped_s_start, ungapped_length, ungapped_score,
                        matrix, gap_open, gap_extend, gap_x_dropoff):
    """prelim_dp_extend in the workspace `band` (see xdrop_score_in); its result with the
    workspace to pass next time appended."""
    query_length = query.size
    x_dropoff = gap_x_dropoff
    if ungapped_score < x_dropoff:
        x_dropoff = ungapped_score
    # start inside the first full byte of a presumably exact 8-letter stretch
    if ungapped_s_start + ungapped_length >= seed_s + 8:
        seed_s += 3
        seed_q += 3
    # the packed kernel starts on a byte boundary: shift the start 1..4 letters right
    shift = PACK_RATIO - seed_s % PACK_RATIO
    q_length = seed_q + shift   # letters [0, q_length) lie left of the split
    s_length = seed_s + shift
    if q_length > query_length or s_length > subject_length:
        q_length -= PACK_RATIO
        s_length -= PACK_RATIO

    # left: rows = subject letters s_length-1, s_length-2, ..; cols = query letters likewise
    score_left, s_used, q_used, band = xdrop_score_in(
        band, packed_subject, s_length, -1, s_length, True,
        query, q_length, -1, q_length,
        matrix, gap_open, gap_extend, x_dropoff)
    q_start = q_length - q_used
    s_start = s_length - s_used

    score_right = 0
    if q_length < query_length and s_length < subject_length:
        score_right, s_used, q_used, band = xdrop_score_in(
            band, packed_subject, s_length - 1, 1, subject_length - s_length, True,
            query, q_length - 1, 1, query_length - q_length,
            matrix, gap_open, gap_extend, x_dropoff)
        q_end = q_length + q_used
        s_end = s_length + s_used
    else:
        q_end = q_length
        s_end = s_length
    return (score_left + score_right, q_start, q_end, s_start, s_end, seed_q, seed_s,
            band)


@njit(cache=True, nogil=True)
def _append_op(ops, lens, count, op, length):
    """Add `length` of `op` to an edit script being built, merging with the last run."""
    if count > 0 and ops[count - 1] == op:
        lens[count - 1] += length
        return count
    ops[count] = op
    lens[count] = length
    return count + 1


@njit(cache=True, nogil=True, constant_args=("row_step", "col_step"))
def align_ex(rows, row_origin, row_step, m, cols, col_origin, col_step, n,
             matrix, gap_open, gap_extend, x_dropoff):
    """X-drop DP with traceback in one direction (ALIGN_EX), rows = query, cols = subject.

    Letter k (1-based) of rows/cols is seq[origin + step * k]; both blastna codes.
    Returns (best score, rows used, columns used, ops, lens, columns read): the edit script
    as BLAST's traceback emits it, from the best cell back to the origin (runs of
    OP_SUB/OP_DEL/OP_INS), and how many columns the search read (letters 1 to that).
    """
    res = align_ex_in(np.empty(0, np.uint8), np.empty(0, np.int32), rows, row_origin,
                      row_step, m, cols, col_origin, col_step, n, matrix, gap_open,
                      gap_extend, x_dropoff)
    return res[0], res[1], res[2], res[3], res[4], res[5]


@njit(cache=True, nogil=True, constant_args=("row_step", "col_step"))
def align_ex_in(cells, band, rows, row_origin, row_step, m, cols, col_origin, col_step, n,
                matrix, gap_open, gap_extend, x_dropoff):
    """align_ex working in the workspaces `cells` (uint8 traceback cells) and `band` (as
    xdrop_score_in's), either of any size, reused across calls as BLAST reuses its
    traceback state: made afresh for each alignment, a long one's cells (doubled as they
    fill) faulted in new pages every time, most of a -task blastn search's page faults.
    Returns align_ex's result with the workspaces to pass next time appended."""
    gap_open_extend = gap_open + gap_extend
    if x_dropoff < gap_open_extend:
        x_dropoff = gap_open_extend
    if n <= 0 or m <= 0:
        return 0, 0, 0, np.empty(0, np.uint8), np.empty(0, np.int32), 0, cells, band
    extra = _band_cells(x_dropoff, gap_extend, n)
    # the band and the rows' bookkeeping sized for every column and row, the cells grown
    # between calls of _align_rows: an array rebound inside the row loop is counted in and
    # out (atomic operations) on every row
    band, b_size = _start_band(band, x_dropoff, gap_open_extend, gap_extend, n, extra, True)
    # traceback cells, row after row; row a holds columns from row_first[a] on
    if cells.size < max(8 * extra, 1 << 16):
        cells = np.empty(max(8 * extra, 1 << 16), dtype=np.uint8)
    row_start = np.empty(m + 1, dtype=np.int64)
    row_first = np.empty(m + 1, dtype=np.int64)
    for i in range(1, b_size):
        cells[i] = OP_DEL
    row_start[0] = 0
    row_first[0] = 0
    a, used, first_b, best_score, best_a, best_b, columns_read = 1, b_size + 1, 0, 0, 0, 0, 0
    while True:
        a, b_size, used, first_b, best_score, best_a, best_b, columns_read, done = _align_rows(
            rows, row_origin, row_step, m, cols, col_origin, col_step, n, matrix,
            gap_open_extend, gap_extend, x_dropoff, extra, band, cells, row_start, row_first,
            a, b_size, used, first_b, best_score, best_a, best_b, columns_read)
        if done:
            break
        cells = grown(cells, used + (b_size - first_b) + extra + 2)

    # walk back from the best cell, following gap-extension flags while in a gap
    ops = np.empty(best_a + best_b + 1, dtype=np.uint8)
    lens = np.empty(best_a + best_b + 1, dtype=np.int32)
    count = 0
    a = best_a
    b = best_b
    script = OP_SUB
    while a > 0 or b > 0:
        cell = cells[row_start[a] + b - row_first[a]]
        if script == OP_DEL:
            script = cell & CELL_OP_MASK
            if cell & CELL_EXTEND_GAP_IN_QUERY:
                script = OP_DEL
        elif script == OP_INS:
            script = cell & CELL_OP_MASK
            if cell & CELL_EXTEND_GAP_IN_SUBJECT:
                script = OP_INS
        else:
            script = cell & CELL_OP_MASK
        if script == OP_DEL:
            b -= 1
        elif script == OP_INS:
            a -= 1
        else:
            a -= 1
            b -= 1
        count = _append_op(ops, lens, count, script, 1)
    return best_score, best_a, best_b, ops[:count].copy(), lens[:count].copy(), columns_read, \
        cells, band


@njit(cache=True, nogil=True, constant_args=("row_step", "col_step"))
def _align_rows(rows, row_origin, row_step, m, cols, col_origin, col_step, n, matrix,
                gap_open_extend, gap_extend, x_dropoff, extra, band, cells, row_start,
                row_first, first_a, b_size, used, first_b, best_score, best_a, best_b,
                columns_read):
    """align_ex's rows from row first_a on, with the state the rows before it left.
    Returns that state after the last row done, and whether the DP ended (False: row `a`
    did not fit in `cells`, which must grow before the next call)."""
    # the matrix and sequences are shared by the threads: a row of the matrix taken per
    # row of cells would count it in and out, bouncing its count between the cores
    rows, cols, matrix = borrowed(rows), borrowed(cols), borrowed(matrix)
    one = np.uint64(1)
    a = first_a
    for a in range(first_a, m + 1):
        # room for this row: the band so far plus what a row gap can add to it
        if used + (b_size - first_b) + extra + 2 > cells.size:
            return a, b_size, used, first_b, best_score, best_a, best_b, columns_read, False
        row_start[a] = used
        row_first[a] = first_b
        base = used - first_b
        orig_first = first_b

        matrix_row = np.uint64(rows[row_origin + row_step * a])  # see xdrop_score_in
        score = MININT
        score_gap_row = MININT
        last_b = first_b
        floor = best_score - x_dropoff
        # the loop of xdrop_score, also writing each cell's script (dead cells included)
        col = col_origin + col_step * first_b
        step = col_step
        start = first_b
        stop = min(b_size, n)
        columns_read = max(columns_read, stop)
        for part in range(2):
            for b in range(start, stop):
                u = np.uint64(2 * b)
                col += step
                score_gap_col = np.int64(band[u + one])
                letter = np.uint64(cols[np.uint64(col)])
                next_score = np.int64(band[u]) + matrix[matrix_row, letter]
                script = OP_SUB
                if score < score_gap_col:
                    script = OP_INS
                    score = score_gap_col
                if score < score_gap_row:
                    script = OP_DEL
                    score = score_gap_row
                if score < floor:
                    if b == first_b:
                        first_b += 1
                    else:
                        band[u] = MININT
                else:
                    last_b = b
                    if score > best_score:
                        best_score = score
                        best_a = a
                        best_b = b
                        floor = score - x_dropoff
                    open_gap = score - gap_open_extend
                    score_gap_row -= gap_extend
                    score_gap_col -= gap_extend
                    if score_gap_col < open_gap:
                        band[u + one] = open_gap
                    else:
                        band[u + one] = score_gap_col
                        script += CELL_EXTEND_GAP_IN_SUBJECT
                    if score_gap_row < open_gap:
                        score_gap_row = open_gap
                    else:
                        script += CELL_EXTEND_GAP_IN_QUERY
                    band[u] = score
                score = next_score
                cells[np.uint64(base + b)] = script
            if stop == b_size:
                break
            col = col_origin + col_step
            step = 0
            start = stop
            stop = b_size
        b = b_size  # the row's loop ran to its end

        if first_b == b_size:
            break
        if last_b < b_size - 1:
            b_size = last_b + 1
        else:
            while score_gap_row >= best_score - x_dropoff and b_size <= n:
                band[2 * b_size] = score_gap_row
                band[2 * b_size + 1] = score_gap_row - gap_open_extend
                score_gap_row -= gap_extend
                cells[base + b_size] = OP_DEL
                b_size += 1
        used += max(b, b_size) - orig_first + 1
        if b_size <= n:
            band[2 * b_size] = MININT
            band[2 * b_size + 1] = MININT
            b_size += 1

    return a, b_size, used, first_b, best_score, best_a, best_b, columns_read, True


@njit(cache=True, nogil=True)
def adjust_subject_range(s_start, subject_length, q_start, query_length):
    """The subject window the traceback works in (AdjustSubjectRange).

    Returns (shift, s_start within the window, window length); the window is
    subject[shift:shift + length]. Subjects shorter than MAX_SUBJECT_OFFSET are not cut.
    """
    if subject_length < MAX_SUBJECT_OFFSET:
        return 0, s_start, subject_length
    max_left = q_start + MAX_TOTAL_GAPS
    max_right = query_length - q_start + MAX_TOTAL_GAPS
    shift = 0
    new_s_start = s_start
    if s_start > max_left:
        shift = s_start - max_left
        new_s_start = max_left
    return shift, new_s_start, min(subject_length, s_start + max_right) - shift


@njit(cache=True, nogil=True)
def traceback_dp(query, q_start, subject, s_start, matrix, gap_open, gap_extend,
                 x_dropoff_final):
    """Gapped alignment with traceback from one start point (BLAST_GappedAlignmentWithTraceback).

    query: blastna codes of the HSP's context only; subject: the whole subject in blastna
    with its true ambiguity codes. (q_start, s_start): the start point, usually from
    `gapped_start_nucl`; it belongs to the left extension. x_dropoff_final: raw final X-drop
    (blastn 110, blastn-short 50). Long subjects are cut to `adjust_subject_range`'s
    window; returned coordinates are on the whole subject.

    Returns (score, q_start, q_end, s_start, s_end, ops, op_len, s_read_start, s_read_end):
    ends exclusive; the edit script (uint8 OP_* runs, int32 lengths) reads from the
    alignment's start. Leading or trailing gaps (possible only in odd cases) are removed and
    their cost given back, as BLAST does. An empty script means nothing aligned. No subject
    letter outside [s_read_start, s_read_end) was read.
    """
    res = traceback_dp_in(np.empty(0, np.uint8), np.empty(0, np.int32), query, q_start,
                          subject, s_start, matrix, gap_open, gap_extend, x_dropoff_final)
    return res[0], res[1], res[2], res[3], res[4], res[5], res[6], res[7], res[8]


@njit(cache=True, nogil=True)
def traceback_dp_in(cells, band, query, q_start, subject, s_start, matrix, gap_open,
                    gap_extend, x_dropoff_final):
    """traceback_dp in align_ex_in's workspaces; its result with them appended."""
    query_length = query.size
    shift, s_off, s_length = adjust_subject_range(s_start, subject.size, q_start, query_length)
    sub = subject[shift:shift + s_length]

    # left, the start letters included: rows run down from q_start, columns from s_off
    score_left, q_used, s_used, left_ops, left_lens, read_left, cells, band = align_ex_in(
        cells, band, query, q_start + 1, -1, q_start + 1, sub, s_off + 1, -1, s_off + 1,
        matrix, gap_open, gap_extend, x_dropoff_final)
    aln_q_start = q_start - q_used + 1
    aln_s_start = s_off - s_used + 1

    score_right = 0
    read_right = 0
    right_ops = np.empty(0, np.uint8)
    right_lens = np.empty(0, np.int32)
    if q_start < query_length and s_off < s_length:
        score_right, q_used, s_used, right_ops, right_lens, read_right, cells, band = \
            align_ex_in(cells, band, query, q_start, 1, query_length - q_start - 1,
                        sub, s_off, 1, s_length - s_off - 1,
                        matrix, gap_open, gap_extend, x_dropoff_final)
        aln_q_end = q_start + q_used + 1
        aln_s_end = s_off + s_used + 1
    else:
        aln_q_end = q_start - 1
        aln_s_end = s_off - 1

    # left script already reads forward; the right one reads backward. Join them, merging
    # the two runs that meet at the start point when they are of one kind.
    n_left = left_ops.size
    n_right = right_ops.size
    ops = np.empty(n_left + n_right, dtype=np.uint8)
    lens = np.empty(n_left + n_right, dtype=np.int32)
    count = 0
    for k in range(n_left):
        ops[count] = left_ops[k]
        lens[count] = left_lens[k]
        count += 1
    k = n_right - 1
    if n_right > 0 and n_left > 0 and right_ops[n_right - 1] == left_ops[n_left - 1]:
        lens[count - 1] += right_lens[n_right - 1]
        k -= 1
    while k >= 0:
        ops[count] = right_ops[k]
        lens[count] = right_lens[k]
        count += 1
        k -= 1

    # drop leading and trailing gaps, refunding their cost
    head = 0
    while head < count and ops[head] != OP_SUB:
        score_left += gap_open + lens[head] * gap_extend
        if ops[head] == OP_DEL:
            aln_s_start += lens[head]
        else:
            aln_q_start += lens[head]
        head += 1
    tail = count
    while tail > head and ops[tail - 1] != OP_SUB:
        score_right += gap_open + lens[tail - 1] * gap_extend
        if ops[tail - 1] == OP_DEL:
            aln_s_end -= lens[tail - 1]
        else:
            aln_q_end -= lens[tail - 1]
        tail -= 1
    # the left search read letters s_off down, the right one from s_off + 1 up
    read_end = s_off + 1 + read_right
    return (score_left + score_right, aln_q_start, aln_q_end,
            aln_s_start + shift, aln_s_end + shift,
            ops[head:tail].copy(), lens[head:tail].copy(),
            min(s_off + 1 - read_left, read_end) + shift, read_end + shift, cells, band)


@njit(cache=True, nogil=True)
def gapped_start_nucl(query, subject, q_start, q_end, s_start, s_end, q_gapped, s_gapped):
    """The traceback start point for blastn (BlastGetStartForGappedAlignmentNucl).

    query: the context's blastna codes; subject: blastna. The HSP box is [q_start, q_end) x
    [s_start, s_end); (q_gapped, s_gapped) the stored start point. Keeps it when it lies in
    an exact run of more than 10 letters (counted from it to the HSP's query end and down
    to the query start); otherwise takes, on the start point's diagonal inside the box, the
    middle of the first run longer than 15, or of the longest run. Letters compare by code
    (N equals N). Returns the new (q_gapped, s_gapped).
    """
    max_run = 10
    # run through the stored point: forward to the HSP end, then backward (the point itself
    # counted twice, hence the -1)
    score = -1
    q = q_gapped
    s = s_gapped
    while q < q_end:
        same = s < subject.size and query[q] == subject[s]
        q += 1
        s += 1
        if not same:
            break
        score += 1
        if score > max_run:
            return q_gapped, s_gapped
    q = q_gapped
    s = s_gapped
    while q >= 0:
        same = s >= 0 and s < subject.size and query[q] == subject[s]
        q -= 1
        s -= 1
        if not same:
            break
        score += 1
        if score > max_run:
            return q_gapped, s_gapped

    max_run = 15  # moving the point demands a longer run
    back = min(s_gapped - s_start, q_gapped - q_start)
    diag_q = q_gapped - back
    diag_s = s_gapped - back
    length = min(s_end - diag_s, q_end - diag_q)
    max_score = 0
    max_offset = diag_q
    score = 0
    match = False
    prev_match = False
    index = diag_q
    while index < diag_q + length:
        match = query[index] == subject[index + diag_s - diag_q]
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
                return max_offset, max_offset + diag_s - diag_q
        index += 1
    if match and score > max_score:
        max_score = score
        max_offset = index - score // 2
    if max_score > 0:
        return max_offset, max_offset + diag_s - diag_q
    return q_gapped, s_gapped


@njit(cache=True, nogil=True)
def gapped_offsets(query, subject, matrix, q_start, q_end, s_start, s_end):
    """Start point for an HSP that has none stored (BlastGetOffsetsForGappedAlignment).

    Short HSPs (query span <= 11) start in the middle; otherwise at the last letter of the
    best-scoring 11-letter window along the HSP's first diagonal, or, failing a positive
    window, 5 letters before the HSP's end when the last window scores positive.
    Returns (found, q, s); found False means BLAST drops the HSP.
    """
    q_length = q_end - q_start
    s_length = s_end - s_start
    if q_length <= HSP_MAX_WINDOW:
        return True, q_start + q_length // 2, s_start + q_length // 2
    score = 0
    for k in range(HSP_MAX_WINDOW):
        score += matrix[query[q_start + k], subject[s_start + k]]
    max_score = score
    max_offset = q_start + HSP_MAX_WINDOW - 1
    for index in range(q_start + HSP_MAX_WINDOW, q_start + min(q_length, s_length)):
        k = index - q_start
        score -= matrix[query[index - HSP_MAX_WINDOW], subject[s_start + k - HSP_MAX_WINDOW]]
        score += matrix[query[index], subject[s_start + k]]
        if score > max_score:
            max_score = score
            max_offset = index
    if max_score > 0:
        return True, max_offset, max_offset - q_start + s_start
    score = 0
    for k in range(HSP_MAX_WINDOW):
        score += matrix[query[q_end - HSP_MAX_WINDOW + k], subject[s_end - HSP_MAX_WINDOW + k]]
    if score > 0:
        return True, q_end - HSP_MAX_WINDOW // 2, s_end - HSP_MAX_WINDOW // 2
    return False, q_start, s_start
