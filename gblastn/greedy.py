"""Greedy gapped alignment (Zhang, Schwartz, Wagner & Miller 2000), as megablast runs it.

Instead of scores, the aligner tracks the *distance* of an alignment (mismatches plus gap
columns, or scaled affine costs) and, for every distance d and diagonal k, the furthest
subject offset reachable.  X-drop is applied by comparing with the best score seen
``xdrop_offset`` distances earlier.  Everything here mirrors BLAST+ 2.12 (greedy_align.c and
BLAST_GreedyGappedAlignment / s_ReduceGaps in blast_gapalign.c) closely enough to reproduce
its tie choices:

* seq1 is the query (blastna; a letter >= 4 never matches), seq2 the subject, either packed
  2-bit (preliminary stage, ``packed=True``) or blastna (traceback, ``packed=False``);
* diagonal k holds cells with ``seq1 = seq2 + k - origin``;
* the extension to the left runs the same code on reversed indices;
* when BLAST's search memory (``max_dist`` distances) runs out before the search converges,
  BLAST retries with twice the memory; the result does not depend on the memory, so here the
  per-distance arrays simply grow and each direction is searched once.

Coordinates passed in are absolute indices into the arrays given: the query is the batch's
concatenated blastna sequence and the subject a chunk (packed) or the whole subject (blastna).

Edit scripts are runs of (op, length) with the ``gblastn.layouts`` OP_* codes:
OP_SUB aligned pair, OP_DEL gap in the query, OP_INS gap in the subject.
"""

import math

import numpy as np

from .arrays import grown
from .layouts import INVALID_OFFSET, OP_DEL, OP_INS, OP_SUB, RUN_COUNT_SHIFT, RUN_OP_MASK
from .numba_start import njit
from .wordrun import WORD_PAD, letter_run_backward, letter_run_forward, packed_run_backward, \
    packed_run_forward


INVALID_DIAG = 100000000     # bounds of an empty range of diagonals
GREEDY_MAX_COST = 1000       # first search memory, in distances (BLAST's GREEDY_MAX_COST)
OUTSIDE = 15                 # what the subject holds outside its ends (BLAST's sentinel byte)
# the two aligners' argument types (compile_ahead's notation; `seqs` as _sequences makes it)
SEQUENCES_TYPE = "(u64,i64,i64,i64,i64,i64,u64,i64,i64,i64)"
GREEDY_LINEAR_ARGUMENTS = SEQUENCES_TYPE + " bool bool i64 i64 i64 i64 bool i64"
GREEDY_AFFINE_ARGUMENTS = SEQUENCES_TYPE + " bool bool i64 i64 i64 i64 i64 i64 bool"


# ----------------------------------------------------------------------------------------------
# letters and exact runs


@njit(cache=True, nogil=True)
def _sequences(query, query_bases, query_ambig, q_origin, len1, subject, s_origin, len2):
    """What exact_run reads, as plain integers (addresses and bounds): arrays passed to a
    function in the aligner's inner loop would have their references counted at each call."""
    return (query.ctypes.data, query.size, query_bases.ctypes.data + WORD_PAD,
            query_ambig.ctypes.data + WORD_PAD, q_origin, len1,
            subject.ctypes.data, subject.size, s_origin, len2)


@njit(cache=True, nogil=True, inline="always")
def exact_run(seqs, packed, reverse, i1, i2):
    """Number of matches from (seq1 index i1, seq2 index i2) on; BLAST's s_FindFirstMismatch.

    Forward, seq1 index i is query[q_origin + i]; reverse, it is query[q_origin - 1 - i]
    (and likewise for the subject), so the left extension reads the sequences backwards.
    `seqs` comes from _sequences; packed subjects are compared with the query's packed
    words (pack_query_words), blastna subjects letter against letter."""
    q_letters, q_size, q_bases, q_ambig, q_origin, len1, s_addr, s_size, s_origin, len2 = seqs
    limit = min(len1 - i1, len2 - i2)
    if limit <= 0:
        return 0
    if packed:
        if reverse:
            return packed_run_backward(q_bases, q_ambig, q_origin - 1 - i1, s_addr,
                                       s_origin - 1 - i2, limit)
        return packed_run_forward(q_bases, q_ambig, q_origin + i1, s_addr, s_size,
                                  s_origin + i2, limit)
    if reverse:
        return letter_run_backward(q_letters, q_origin - 1 - i1, s_addr, s_origin - 1 - i2,
                                   limit)
    return letter_run_forward(q_letters, q_size, q_origin + i1, s_addr, s_size, s_origin + i2,
                              limit)


# ----------------------------------------------------------------------------------------------
# edit blocks: runs appended in traceback order, merging with the last run of the same op


@njit(cache=True, nogil=True)
def _edit_add(ops, nums, n, op, count):
    """GapPrelimEditBlockAdd; returns the new number of runs (arrays are grown by the caller)."""
    if count == 0:
        return n
    if n > 0 and ops[n - 1] == op:
        nums[n - 1] += count
        return n
    ops[n] = op
    nums[n] = count
    return n + 1


# ----------------------------------------------------------------------------------------------
# non-affine (linear gap cost) greedy alignment: BLAST_GreedyAlign


@njit(cache=True, nogil=True)
def greedy_linear(seqs, packed, reverse, xdrop, match_cost, mismatch_cost, max_dist, traceback,
                  stop_dist):
    """One direction of the non-affine greedy extension of the sequences `seqs` (_sequences').

    match_cost/mismatch_cost/xdrop are already doubled for an odd reward.  Returns
    (reach, best_dist, seq1_len, seq2_len, seed_q, seed_s, seed_len, ops, nums, n_ops):
    reach bounds the subject letters read (seq2 offsets below it, each run's mismatch
    included), best_dist the distance of the best alignment, seq*_len its extent, seed the
    longest exact run met, and, with traceback, the edit runs from the far end back to the
    start point.  max_dist only sizes the first allocation: the per-distance arrays grow as
    the search goes on, so the result is the one BLAST reaches after its memory doublings,
    without redoing the work. stop_dist >= 0: the best alignment's distance, known ahead
    (a GPU's score-only search): the search stops there, past which it only confirms that
    nothing better follows; every row up to it, and so the result, is the same."""
    half = match_cost // 2
    op_cost = match_cost + mismatch_cost
    xdrop_offset = (xdrop + half) // op_cost + 1
    ops = np.empty(8, dtype=np.uint8)
    nums = np.empty(8, dtype=np.int32)
    n_ops = 0
    len1, len2 = seqs[5], seqs[9]
    index = exact_run(seqs, packed, reverse, 0, 0)
    reach = min(index + 1, len2)
    seq1_len = index
    seq2_len = index
    seed_q = 0
    seed_s = 0
    seed_len = index
    longest = index
    if index == len1 or index == len2 or stop_dist == 0:
        if traceback:
            n_ops = _edit_add(ops, nums, n_ops, OP_SUB, index)
        return reach, 0, seq1_len, seq2_len, seed_q, seed_s, seed_len, ops, nums, n_ops

    origin = max_dist + 2
    # best score per distance; entries before distance 0 are 0
    best_by_dist = np.zeros(max_dist + 1 + xdrop_offset, dtype=np.int64)
    # rows of furthest seq2 offsets, one per distance, each covering [row_lo, row_lo + width)
    row_at = np.empty(max_dist + 3, dtype=np.int64)
    row_lo = np.empty(max_dist + 3, dtype=np.int64)
    cells = np.empty(64, dtype=np.int64)
    used = 0

    row_at[0] = 0
    row_lo[0] = origin - 2
    cells[0:5] = INVALID_OFFSET
    cells[2] = index
    used = 5
    best_by_dist[xdrop_offset] = index * match_cost
    lower = origin - 1
    upper = origin + 1
    width = upper - lower + 5
    cells = grown(cells, used + width)
    row_at[1] = used
    row_lo[1] = lower - 2
    cells[used:used + width] = INVALID_OFFSET
    used += width

    end1_reached = False
    end2_reached = False
    best_dist = 0
    best_diag = 0
    d = 0
    while True:
        d += 1
        if d + 2 > row_at.size:
            row_at = grown(row_at, d + 2)
            row_lo = grown(row_lo, d + 2)
        if d + xdrop_offset >= best_by_dist.size:
            best_by_dist = grown(best_by_dist, d + xdrop_offset + 1)
        prev = row_at[d - 1] - row_lo[d - 1]
        here = row_at[d] - row_lo[d]
        # diagonals just outside the range get impossible offsets: the loop reads them
        cells[prev + lower - 1] = INVALID_OFFSET
        cells[prev + lower] = INVALID_OFFSET
        cells[prev + upper] = INVALID_OFFSET
        cells[prev + upper + 1] = INVALID_OFFSET

        xdrop_score = best_by_dist[d] + op_cost * d - xdrop
        xdrop_score = int(math.ceil(xdrop_score / half))

        cur_extent = 0
        cur_seq2 = 0
        cur_diag = 0
        first = lower
        last = upper
        for k in range(first, last + 1):
            seq2 = max(cells[prev + k + 1], cells[prev + k]) + 1
            seq2 = max(seq2, cells[prev + k - 1])
            seq1 = seq2 + k - origin
            if seq2 < 0 or seq1 + seq2 < xdrop_score:
                if k == lower:
                    lower += 1
                else:
                    cells[here + k] = INVALID_OFFSET
                continue
            upper = k
            run = exact_run(seqs, packed, reverse, seq1, seq2)
            if run > longest:
                seed_q = seq1
                seed_s = seq2
                seed_len = run
                longest = run
            seq1 += run
            seq2 += run
            cells[here + k] = seq2
            if seq2 >= reach:
                reach = min(seq2 + 1, len2)
            if seq1 + seq2 > cur_extent:
                cur_extent = seq1 + seq2
                cur_seq2 = seq2
                cur_diag = k
            if seq2 == len2:
                lower = k + 1
                end2_reached = True
            if seq1 == len1:
                upper = k - 1
                end1_reached = True

        cur_score = cur_extent * half - d * op_cost
        if cur_score >= best_by_dist[d - 1 + xdrop_offset]:
            best_by_dist[d + xdrop_offset] = cur_score
            best_dist = d
            best_diag = cur_diag
            seq2_len = cur_seq2
            seq1_len = cur_seq2 + best_diag - origin
        else:
            best_by_dist[d + xdrop_offset] = best_by_dist[d - 1 + xdrop_offset]

        if lower > upper or d == stop_dist:
            break
        if not end2_reached:
            lower -= 1
        if not end1_reached:
            upper += 1
        width = upper - lower + 5
        if used + width > cells.size and not traceback:
            # score only: no row before d is read again, so row d moves to the front and
            # the rows take about twice the widest row, not the sum of them all (their
            # growth faulted in fresh pages, most of a megablast search's page faults)
            start = row_at[d]
            for j in range(start, used):
                cells[j - start] = cells[j]
            row_at[d] = 0
            used -= start
        if used + width > cells.size:
            cells = grown(cells, used + width)
        row_at[d + 1] = used
        row_lo[d + 1] = lower - 2
        for j in range(used, used + width):
            cells[j] = INVALID_OFFSET
        used += width

    if not traceback:
        return reach, best_dist, seq1_len, seq2_len, seed_q, seed_s, seed_len, ops, nums, 0

    # walk back from the best cell, choosing the predecessor with the largest seq2 offset
    ops = np.empty(2 * best_dist + 4, dtype=np.uint8)
    nums = np.empty(2 * best_dist + 4, dtype=np.int32)
    d = best_dist
    diag = best_diag
    seq2 = seq2_len
    while d > 0:
        prev = row_at[d - 1] - row_lo[d - 1]
        left = cells[prev + diag - 1]
        mid = cells[prev + diag]
        right = cells[prev + diag + 1]
        if left > max(mid, right):
            new_diag = diag - 1
            new_seq2 = left
        elif mid > right:
            new_diag = diag
            new_seq2 = mid
        else:
            new_diag = diag + 1
            new_seq2 = right
        if new_diag == diag:
            if seq2 - new_seq2 > 0:
                n_ops = _edit_add(ops, nums, n_ops, OP_SUB, seq2 - new_seq2)
        elif new_diag < diag:
            if seq2 - new_seq2 > 0:
                n_ops = _edit_add(ops, nums, n_ops, OP_SUB, seq2 - new_seq2)
            n_ops = _edit_add(ops, nums, n_ops, OP_INS, 1)
        else:
            if seq2 - new_seq2 - 1 > 0:
                n_ops = _edit_add(ops, nums, n_ops, OP_SUB, seq2 - new_seq2 - 1)
            n_ops = _edit_add(ops, nums, n_ops, OP_DEL, 1)
        d -= 1
        diag = new_diag
        seq2 = new_seq2
    n_ops = _edit_add(ops, nums, n_ops, OP_SUB, cells[row_at[0] - row_lo[0] + origin])
    return reach, best_dist, seq1_len, seq2_len, seed_q, seed_s, seed_len, ops, nums, n_ops


# ----------------------------------------------------------------------------------------------
# affine greedy alignment: BLAST_AffineGreedyAlign


@njit(cache=True, nogil=True)
def _in_range(lower_of, upper_of, at, k):
    return lower_of[at] <= k <= upper_of[at]


@njit(cache=True, nogil=True)
def greedy_affine(seqs, packed, reverse, xdrop, match_score, mismatch_score, gap_open_in,
                  gap_extend_in, max_dist, traceback):
    """One direction of the affine greedy extension of the sequences `seqs` (_sequences';
    scores already doubled for an odd reward).  Returns (reach, score, seq1_len, seq2_len, seed_q, seed_s, seed_len, ops,
    nums, n_ops) with the score in the (doubled) units given; reach and max_dist as in
    greedy_linear."""
    half = match_score // 2
    op_cost = match_score + mismatch_score
    gap_open = gap_open_in
    gap_extend = gap_extend_in + half
    if gap_open == 0:
        common = math.gcd(op_cost, gap_extend)
    else:
        common = math.gcd(op_cost, math.gcd(gap_open, gap_extend))
    if common > 1:
        op_cost //= common
        gap_open //= common
        gap_extend //= common
    open_extend = gap_open + gap_extend
    max_penalty = max(op_cost, open_extend)
    scaled_max_dist = max_dist * gap_extend
    origin = max_dist + 2
    xdrop_offset = (xdrop + half) // common + 1

    ops = np.empty(8, dtype=np.uint8)
    nums = np.empty(8, dtype=np.int32)
    n_ops = 0
    len1, len2 = seqs[5], seqs[9]
    index = exact_run(seqs, packed, reverse, 0, 0)
    reach = min(index + 1, len2)
    seq1_len = index
    seq2_len = index
    seed_q = 0
    seed_s = 0
    seed_len = index
    longest = index
    if index == len1 or index == len2:
        if traceback:
            n_ops = _edit_add(ops, nums, n_ops, OP_SUB, index)
        return reach, index * match_score, seq1_len, seq2_len, seed_q, seed_s, seed_len, ops, nums, n_ops

    best_by_dist = np.zeros(scaled_max_dist + 1 + xdrop_offset, dtype=np.int64)
    # diagonal bounds per distance, max_penalty empty ranges before distance 0
    lower_of = np.empty(scaled_max_dist + 1 + max_penalty, dtype=np.int64)
    upper_of = np.empty(scaled_max_dist + 1 + max_penalty, dtype=np.int64)
    lower_of[:max_penalty] = INVALID_DIAG
    upper_of[:max_penalty] = -INVALID_DIAG
    # per distance, per diagonal: furthest seq2 offset ending in a match / insertion / deletion
    row_at = np.empty(scaled_max_dist + 2, dtype=np.int64)
    row_lo = np.empty(scaled_max_dist + 2, dtype=np.int64)
    match_off = np.empty(64, dtype=np.int64)
    ins_off = np.empty(64, dtype=np.int64)
    del_off = np.empty(64, dtype=np.int64)

    row_at[0] = 0
    row_lo[0] = origin
    match_off[0] = index
    ins_off[0] = INVALID_OFFSET
    del_off[0] = INVALID_OFFSET
    used = 1
    best_by_dist[xdrop_offset] = index * match_score
    lower_of[max_penalty] = origin
    upper_of[max_penalty] = origin

    cur_lower = origin - 1
    cur_upper = origin + 1
    end1_diag = 0
    end2_diag = 0
    nonempty = 1
    d = 1
    best_dist = 0
    best_diag = 0
    mp = max_penalty
    while True:
        if d + 2 > row_at.size:
            row_at = grown(row_at, d + 2)
            row_lo = grown(row_lo, d + 2)
        if d + mp >= lower_of.size:
            lower_of = grown(lower_of, d + mp + 1)
            upper_of = grown(upper_of, d + mp + 1)
        if d + xdrop_offset >= best_by_dist.size:
            best_by_dist = grown(best_by_dist, d + xdrop_offset + 1)
        xdrop_score = best_by_dist[d] + common * d - xdrop
        xdrop_score = int(math.ceil(xdrop_score / half))
        if xdrop_score < 0:
            xdrop_score = 0

        width = max(cur_upper - cur_lower + 1, 0)
        if used + width > match_off.size:
            match_off = grown(match_off, used + width)
            ins_off = grown(ins_off, used + width)
            del_off = grown(del_off, used + width)
        row_at[d] = used
        row_lo[d] = cur_lower
        used += width
        here = row_at[d] - row_lo[d]
        at_oe = d - open_extend
        at_e = d - gap_extend
        at_op = d - op_cost
        base_oe = row_at[at_oe] - row_lo[at_oe] if at_oe >= 0 else 0
        base_e = row_at[at_e] - row_lo[at_e] if at_e >= 0 else 0
        base_op = row_at[at_op] - row_lo[at_op] if at_op >= 0 else 0

        cur_extent = 0
        cur_seq2 = 0
        cur_diag = 0
        first = cur_lower
        last = cur_upper
        for k in range(first, last + 1):
            # a gap in seq1 (deletion) opened from a match or extended, from diagonal k+1
            seq2 = INVALID_OFFSET
            if _in_range(lower_of, upper_of, at_oe + mp, k + 1):
                seq2 = match_off[base_oe + k + 1]
            if _in_range(lower_of, upper_of, at_e + mp, k + 1) and seq2 < del_off[base_e + k + 1]:
                seq2 = del_off[base_e + k + 1]
            if seq2 == INVALID_OFFSET:
                del_off[here + k] = INVALID_OFFSET
            else:
                del_off[here + k] = seq2 + 1
            # a gap in seq2 (insertion), from diagonal k-1
            seq2 = INVALID_OFFSET
            if _in_range(lower_of, upper_of, at_oe + mp, k - 1):
                seq2 = match_off[base_oe + k - 1]
            if _in_range(lower_of, upper_of, at_e + mp, k - 1) and seq2 < ins_off[base_e + k - 1]:
                seq2 = ins_off[base_e + k - 1]
            ins_off[here + k] = seq2
            # or a mismatch on diagonal k
            seq2 = max(ins_off[here + k], del_off[here + k])
            if _in_range(lower_of, upper_of, at_op + mp, k):
                seq2 = max(seq2, match_off[base_op + k] + 1)
            seq1 = seq2 + k - origin
            if seq2 < 0 or seq1 + seq2 < xdrop_score:
                if k == cur_lower:
                    cur_lower += 1
                else:
                    match_off[here + k] = INVALID_OFFSET
                continue
            cur_upper = k
            run = exact_run(seqs, packed, reverse, seq1, seq2)
            if run > longest:
                seed_q = seq1
                seed_s = seq2
                seed_len = run
                longest = run
            seq1 += run
            seq2 += run
            match_off[here + k] = seq2
            if seq2 >= reach:
                reach = min(seq2 + 1, len2)
            if seq1 + seq2 > cur_extent:
                cur_extent = seq1 + seq2
                cur_seq2 = seq2
                cur_diag = k
            if seq1 == len1:
                cur_upper = k
                end1_diag = k - 1
            if seq2 == len2:
                cur_lower = k
                end2_diag = k + 1

        cur_score = cur_extent * half - d * common
        if cur_score > best_by_dist[d - 1 + xdrop_offset]:
            best_by_dist[d + xdrop_offset] = cur_score
            best_dist = d
            best_diag = cur_diag
            seq2_len = cur_seq2
            seq1_len = cur_seq2 + best_diag - origin
        else:
            best_by_dist[d + xdrop_offset] = best_by_dist[d - 1 + xdrop_offset]

        # distances below d may still continue the alignment: stop only after max_penalty
        # consecutive empty ranges
        if cur_lower <= cur_upper:
            nonempty += 1
            lower_of[d + mp] = cur_lower
            upper_of[d + mp] = cur_upper
        else:
            lower_of[d + mp] = INVALID_DIAG
            upper_of[d + mp] = -INVALID_DIAG
        if lower_of[d] <= upper_of[d]:
            nonempty -= 1
        if nonempty == 0:
            break

        d += 1
        cur_lower = min(lower_of[d - open_extend + mp], lower_of[d - gap_extend + mp]) - 1
        cur_lower = min(cur_lower, lower_of[d - op_cost + mp])
        if end2_diag > 0:
            cur_lower = max(cur_lower, end2_diag)
        cur_upper = max(upper_of[d - open_extend + mp], upper_of[d - gap_extend + mp]) + 1
        cur_upper = max(cur_upper, upper_of[d - op_cost + mp])
        if end1_diag > 0:
            cur_upper = min(cur_upper, end1_diag)

    score = best_by_dist[best_dist + xdrop_offset]
    if not traceback:
        return reach, score, seq1_len, seq2_len, seed_q, seed_s, seed_len, ops, nums, 0

    ops = np.empty(2 * best_dist + 4, dtype=np.uint8)
    nums = np.empty(2 * best_dist + 4, dtype=np.int32)
    d = best_dist
    diag = best_diag
    seq2 = seq2_len
    state = OP_SUB
    while d > 0:
        here = row_at[d] - row_lo[d]
        if state == OP_SUB:
            # which operation led to this match run: the one with the largest seq2 offset
            new_state = -1
            new_seq2 = 0
            at = d - op_cost
            if _in_range(lower_of, upper_of, at + mp, diag):
                candidate = match_off[row_at[at] - row_lo[at] + diag]
                if candidate >= max(ins_off[here + diag], del_off[here + diag]):
                    d -= op_cost
                    new_seq2 = candidate
                    new_state = OP_SUB
            if new_state < 0:
                if ins_off[here + diag] > del_off[here + diag]:
                    new_seq2 = ins_off[here + diag]
                    new_state = OP_INS
                else:
                    new_seq2 = del_off[here + diag]
                    new_state = OP_DEL
            n_ops = _edit_add(ops, nums, n_ops, OP_SUB, seq2 - new_seq2)
            seq2 = new_seq2
            state = new_state
        else:
            n_ops = _edit_add(ops, nums, n_ops, state, 1)
            new_diag = diag - 1 if state == OP_INS else diag + 1
            at = d - gap_extend
            gap_seq2 = INVALID_OFFSET
            if _in_range(lower_of, upper_of, at + mp, new_diag):
                if state == OP_INS:
                    gap_seq2 = ins_off[row_at[at] - row_lo[at] + new_diag]
                else:
                    gap_seq2 = del_off[row_at[at] - row_lo[at] + new_diag]
            at = d - open_extend
            if _in_range(lower_of, upper_of, at + mp, new_diag) and \
                    gap_seq2 < match_off[row_at[at] - row_lo[at] + new_diag]:
                d -= open_extend
                next_state = OP_SUB
            else:
                d -= gap_extend
                next_state = state
            if state == OP_INS:
                diag -= 1
            else:
                diag += 1
                seq2 -= 1
            state = next_state
    n_ops = _edit_add(ops, nums, n_ops, OP_SUB, match_off[0])
    return reach, score, seq1_len, seq2_len, seed_q, seed_s, seed_len, ops, nums, n_ops


# ----------------------------------------------------------------------------------------------
# one direction with the memory retry: BLAST_AffineGreedyAlign's dispatch + the doubling loop


@njit(cache=True, nogil=True)
def greedy_one_way(query, query_bases, query_ambig, q_origin, len1, subject, s_origin, len2,
                   packed, reverse, xdrop, reward, penalty, gap_open, gap_extend, traceback,
                   stop_dist):
    """Extend in one direction with BLAST's cost conventions (penalty negative, the X-drop
    and costs doubled inside for an odd reward).  Returns greedy_linear's or greedy_affine's
    values: the second is the distance (linear costs) or the score in the doubled units
    (affine costs). stop_dist: greedy_linear's (linear costs only; -1 for none)."""
    match = reward
    mismatch = -penalty
    if match % 2 == 1:
        match *= 2
        mismatch *= 2
        xdrop *= 2
        gap_open *= 2
        gap_extend *= 2
    # BLAST retries with twice the memory when GREEDY_MAX_COST distances do not suffice; the
    # aligners here grow their memory instead, which gives the same result in one pass.
    # They take the sequences as integers, so that one compilation of each serves read-only
    # and writable arrays alike (a volume's packed subjects, a traceback's unpacked letters)
    seqs = _sequences(query, query_bases, query_ambig, q_origin, len1, subject, s_origin, len2)
    if gap_open == 0 and gap_extend == 0:
        out = greedy_linear(seqs, packed, reverse, xdrop, match, mismatch, GREEDY_MAX_COST,
                            traceback, stop_dist)
    else:
        out = greedy_affine(seqs, packed, reverse, xdrop, match, mismatch, gap_open, gap_extend,
                            GREEDY_MAX_COST, traceback)
    return out


@njit(cache=True, nogil=True)
def greedy_gapped_alignment(query, query_words, q_base, q_length, subject, s_base, s_length,
                            packed, q_off, s_off, xdrop, reward, penalty, gap_open, gap_extend,
                            traceback, stop_right=-1, stop_left=-1):
    """BLAST_GreedyGappedAlignment: extend right from (q_off, s_off), then left.

    query_words: pack_query_words(query), which a packed subject is compared with (unused
    for blastna subjects). The query context is query[q_base : q_base + q_length] and the
    subject (range) is subject[s_base : s_base + s_length] (letters, or packed positions);
    q_off/s_off and the results are relative to those bases.  Returns (score, q_start, q_end,
    s_start, s_end, q_seed, s_seed, ops, nums, n_ops, s_read_start, s_read_end): the raw
    score, the half-open box of the alignment, the new start point estimate (score-only mode;
    the input point with traceback), with traceback the edit script (runs, left to right)
    after gap reduction, and the subject range the search read (no letter outside it can
    change the result; with stop distances, only what the stopped searches read). stop_right,
    stop_left: greedy_linear's stop_dist for each direction."""
    bases, ambig = query_words
    r = greedy_one_way(query, bases, ambig, q_base + q_off, q_length - q_off, subject,
                       s_base + s_off, s_length - s_off, packed, False, xdrop, reward, penalty,
                       gap_open, gap_extend, traceback, stop_right)
    reach_r, score_r, q_ext_r, s_ext_r, fwd_q, fwd_s, fwd_len, fwd_ops, fwd_nums, fwd_n = r
    l = greedy_one_way(query, bases, ambig, q_base + q_off, q_off, subject, s_base + s_off,
                       s_off, packed, True, xdrop, reward, penalty, gap_open, gap_extend, traceback,
                       stop_left)
    reach_l, score_l, q_ext_l, s_ext_l, rev_q, rev_s, rev_len, rev_ops, rev_nums, rev_n = l

    if gap_open == 0 and gap_extend == 0:
        score = (q_ext_r + s_ext_r + q_ext_l + s_ext_l) * reward // 2 - \
            (score_r + score_l) * (reward - penalty)
    else:
        score = score_r + score_l
        if reward % 2 == 1:
            score = score // 2

    q_seed = q_off
    s_seed = s_off
    if traceback:
        ops, nums, n_ops = _edit_script(query, q_base, q_off, q_ext_l, q_ext_r, subject, s_base,
                                        s_off, s_ext_l, s_ext_r, rev_ops, rev_nums, rev_n,
                                        fwd_ops, fwd_nums, fwd_n)
    else:
        n_ops = 0
        ops = np.empty(0, dtype=np.uint8)
        nums = np.empty(0, dtype=np.int32)
        q_seed, s_seed = _best_start_point(q_off, s_off, q_ext_l, s_ext_l, q_ext_r, s_ext_r,
                                           fwd_q, fwd_s, fwd_len, rev_q, rev_s, rev_len)
    return (score, q_off - q_ext_l, q_off + q_ext_r, s_off - s_ext_l, s_off + s_ext_r,
            q_seed, s_seed, ops, nums, n_ops, s_off - reach_l, s_off + reach_r)


@njit(cache=True, nogil=True)
def greedy_alignment_from_runs(query, q_base, subject, s_base, q_off, s_off, reward, penalty,
                               dist_r, dist_l, q_ext_r, s_ext_r, q_ext_l, s_ext_l, runs, n_right,
                               n_left, half):
    """greedy_gapped_alignment's traceback (linear gap costs) from both directions' searches
    made elsewhere (greedy.cu's tail_search): their best distances, extents and walked-back
    edit runs, as greedy_linear leaves them, packed (count << RUN_COUNT_SHIFT | op); `runs`
    holds the right direction's n_right from 0 and the left's n_left from `half`. Returns score, q_start,
    q_end, s_start, s_end, ops, nums, n_ops (as greedy_gapped_alignment's)."""
    fwd_ops = (runs[:n_right] & RUN_OP_MASK).astype(np.uint8)
    fwd_nums = (runs[:n_right] >> RUN_COUNT_SHIFT).astype(np.int32)
    rev_ops = (runs[half:half + n_left] & RUN_OP_MASK).astype(np.uint8)
    rev_nums = (runs[half:half + n_left] >> RUN_COUNT_SHIFT).astype(np.int32)
    score = (q_ext_r + s_ext_r + q_ext_l + s_ext_l) * reward // 2 - \
        (dist_r + dist_l) * (reward - penalty)
    ops, nums, n_ops = _edit_script(query, q_base, q_off, q_ext_l, q_ext_r, subject, s_base,
                                    s_off, s_ext_l, s_ext_r, rev_ops, rev_nums, n_left, fwd_ops,
                                    fwd_nums, n_right)
    return (score, q_off - q_ext_l, q_off + q_ext_r, s_off - s_ext_l, s_off + s_ext_r, ops, nums,
            n_ops)


@njit(cache=True, nogil=True)
def _edit_script(query, q_base, q_off, q_ext_l, q_ext_r, subject, s_base, s_off, s_ext_l,
                 s_ext_r, rev_ops, rev_nums, rev_n, fwd_ops, fwd_nums, fwd_n):
    """Both directions' edit runs joined, then their gaps reduced: ops, nums, n_ops."""
    ops = np.empty(rev_n + fwd_n + 1, dtype=np.uint8)
    nums = np.empty(rev_n + fwd_n + 1, dtype=np.int32)
    n_ops = _join_edit_blocks(rev_ops, rev_nums, rev_n, fwd_ops, fwd_nums, fwd_n, ops, nums)
    n_ops = reduce_gaps(ops, nums, n_ops, query, q_base + q_off - q_ext_l,
                        q_base + q_off + q_ext_r, subject, s_base + s_off - s_ext_l,
                        s_base + s_off + s_ext_r)
    return ops, nums, n_ops


@njit(cache=True, nogil=True)
def _best_start_point(q_off, s_off, q_ext_l, s_ext_l, q_ext_r, s_ext_r,
                      fwd_q, fwd_s, fwd_len, rev_q, rev_s, rev_len):
    """Middle of the longest exact run the aligner met, kept inside the alignment's box."""
    q_box_l = q_off - q_ext_l
    s_box_l = s_off - s_ext_l
    q_box_r = q_off + q_ext_r
    s_box_r = s_off + s_ext_r
    q_l = q_off - rev_q
    s_l = s_off - rev_s
    q_r = q_off + fwd_q
    s_r = s_off + fwd_s
    valid_l = 0
    valid_r = 0
    if q_r < q_box_r and s_r < s_box_r:
        valid_r = min(min(q_box_r - q_r, s_box_r - s_r), fwd_len) // 2
    else:
        q_r = q_off
        s_r = s_off
    if q_l > q_box_l and s_l > s_box_l:
        valid_l = min(min(q_l - q_box_l, s_l - s_box_l), rev_len) // 2
    else:
        q_l = q_off
        s_l = s_off
    if valid_r > valid_l:
        return q_r + valid_r, s_r + valid_r
    return q_l - valid_l, s_l - valid_l


@njit(cache=True, nogil=True)
def _join_edit_blocks(rev_ops, rev_nums, rev_n, fwd_ops, fwd_nums, fwd_n, ops, nums):
    """Blast_PrelimEditBlockToGapEditScript: the left part is already in order, the right
    part was recorded from its far end; runs meeting at the start point are merged."""
    merge = fwd_n > 0 and rev_n > 0 and fwd_ops[fwd_n - 1] == rev_ops[rev_n - 1]
    n = 0
    for i in range(rev_n):
        ops[n] = rev_ops[i]
        nums[n] = rev_nums[i]
        n += 1
    if fwd_n == 0:
        return n
    i = fwd_n - 1
    if merge:
        nums[n - 1] += fwd_nums[fwd_n - 1]
        i = fwd_n - 2
    while i >= 0:
        ops[n] = fwd_ops[i]
        nums[n] = fwd_nums[i]
        n += 1
        i -= 1
    return n


# ----------------------------------------------------------------------------------------------
# edit-script tidy-up after greedy traceback: s_ReduceGaps, s_UpdateEditScript,
# s_RebuildEditScript.  The letter comparisons are on blastna codes (N equals N).


@njit(cache=True, nogil=True)
def _s_at(subject, pos):
    if pos < 0 or pos >= subject.size:
        return OUTSIDE
    return subject[pos]


@njit(cache=True, nogil=True)
def _update_edit_script(ops, nums, size, pos, before, after):
    """Grow the substitution run at `pos` by `before` letters on its left and `after` on its
    right, taking them from the neighbouring runs (s_UpdateEditScript)."""
    if before > 0:
        op = pos
        qd = before
        sd = before
        while True:
            op -= 1
            if op < 0:
                return
            if ops[op] == OP_SUB:
                qd -= nums[op]
                sd -= nums[op]
            elif ops[op] == OP_INS:
                qd -= nums[op]
            elif ops[op] == OP_DEL:
                sd -= nums[op]
            if not (qd > 0 or sd > 0):
                break
        nums[op] = -max(qd, sd)
        ops[op] = OP_SUB
        op += 1
        while op < pos - 1:
            nums[op] = 0
            op += 1
        nums[pos] += before
        qd -= sd
        ops[pos - 1] = OP_DEL if qd > 0 else OP_INS
        nums[pos - 1] = qd if qd > 0 else -qd
    if after > 0:
        op = pos
        qd = after
        sd = after
        while True:
            op += 1
            if op >= size:
                return
            if ops[op] == OP_SUB:
                qd -= nums[op]
                sd -= nums[op]
            elif ops[op] == OP_INS:
                qd -= nums[op]
            elif ops[op] == OP_DEL:
                sd -= nums[op]
            if not (qd > 0 or sd > 0):
                break
        nums[op] = -max(qd, sd)
        ops[op] = OP_SUB
        op -= 1
        while op > pos + 1:
            nums[op] = 0
            op -= 1
        nums[pos] += after
        qd -= sd
        ops[pos + 1] = OP_DEL if qd > 0 else OP_INS
        nums[pos + 1] = qd if qd > 0 else -qd


@njit(cache=True, nogil=True)
def _rebuild_edit_script(ops, nums, size):
    """Drop empty runs, merge equal neighbours, and turn an insertion next to a deletion into
    substitutions plus the leftover gap (s_RebuildEditScript).  Returns the new size."""
    j = -1
    for i in range(size):
        if nums[i] == 0:
            continue
        if j >= 0 and ops[i] == ops[j]:
            nums[j] += nums[i]
        elif j == -1 or ops[i] == OP_SUB or ops[j] == OP_SUB:
            j += 1
            ops[j] = ops[i]
            nums[j] = nums[i]
        else:
            d = nums[j] - nums[i]
            # BLAST assumes a substitution run precedes two adjacent gaps
            if d > 0:
                if j > 0:
                    nums[j - 1] += nums[i]
                nums[j] = d
            elif d < 0:
                if j > 0:
                    nums[j - 1] += nums[j]
                nums[j] = -d
                ops[j] = ops[i]
            else:
                if j > 0:
                    nums[j - 1] += nums[j]
                j -= 1
    return j + 1


@njit(cache=True, nogil=True)
def reduce_gaps(ops, nums, size, query, q_start, q_end, subject, s_start, s_end):
    """s_ReduceGaps on the edit script of an alignment spanning query[q_start:q_end] and
    subject[s_start:s_end] (absolute indices).  Returns the new number of runs."""
    # 1. long substitution runs absorb exact matches lying just beyond them
    q1 = q_start
    s1 = s_start
    for i in range(size):
        if nums[i] == 0:
            continue
        if ops[i] == OP_SUB:
            if nums[i] >= 12:
                nm1 = 1
                if i > 0:
                    while q1 - nm1 >= q_start and query[q1 - nm1] == _s_at(subject, s1 - nm1):
                        nm1 += 1
                q1 += nums[i]
                s1 += nums[i]
                nm2 = 0
                if i < size - 1:
                    while q1 + 1 < q_end and s1 + 1 < s_end:
                        a = query[q1]
                        b = _s_at(subject, s1)
                        q1 += 1
                        s1 += 1
                        if a != b:
                            break
                        nm2 += 1
                if nm1 > 1 or nm2 > 0:
                    _update_edit_script(ops, nums, size, i, nm1 - 1, nm2)
                q1 -= 1
                s1 -= 1
            else:
                q1 += nums[i]
                s1 += nums[i]
        elif ops[i] == OP_INS:
            q1 += nums[i]
        else:
            s1 += nums[i]
    size = _rebuild_edit_script(ops, nums, size)

    # 2. gap, short substitution run, opposite gap: shift the shorter gap across when the
    #    substitutions score no worse that way
    q = q_start
    s = s_start
    for i in range(size):
        if ops[i] == OP_SUB:
            q += nums[i]
            s += nums[i]
            continue
        if i > 1 and ops[i] != ops[i - 2] and nums[i - 2] > 0:
            d = nums[i] + nums[i - 1] + nums[i - 2]
            if d == 3:
                nums[i - 2] = 0
                nums[i - 1] = 2
                nums[i] = 0
                if ops[i] == OP_INS:
                    q += 1
                else:
                    s += 1
            elif d < 12:
                nm1 = 0
                nm2 = 0
                d = min(nums[i], nums[i - 2])
                q -= nums[i - 1]
                s -= nums[i - 1]
                qa = q
                sa = s
                if ops[i] == OP_INS:
                    s -= d
                else:
                    q -= d
                for _ in range(nums[i - 1]):
                    if query[qa] == _s_at(subject, sa):
                        nm1 += 1
                    if query[q] == _s_at(subject, s):
                        nm2 += 1
                    qa += 1
                    sa += 1
                    q += 1
                    s += 1
                for _ in range(d):
                    if query[q] == _s_at(subject, s):
                        nm2 += 1
                    q += 1
                    s += 1
                if nm2 >= nm1 - d:
                    nums[i - 2] -= d
                    nums[i - 1] += d
                    nums[i] -= d
                else:
                    q = qa
                    s = sa
        if ops[i] == OP_INS:
            q += nums[i]
        else:
            s += nums[i]
    return _rebuild_edit_script(ops, nums, size)
