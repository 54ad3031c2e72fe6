"""Symmetric DUST (Morgulis et al. 2006), reproducing the masks blastn 2.12 puts on a query.

The scan follows NCBI's ``CSymDustMasker`` step for step, because the exact interval list
depends on its bookkeeping and not only on the definition of a perfect interval:

* Bases become 2-bit letters: C=1, G=2, T=3, N a pseudo-random letter (below), everything
  else (A and the other IUPAC codes) 0. Three consecutive letters form a triplet (0..63).
* A window holds up to ``window - 2`` triplets. For the window we keep the triplet counts, the
  running score ``sum c*(c-1)/2`` and the number of distinct triplets. We also keep a suffix
  ``[L, stop)`` of the window in which no triplet occurs more than ``level // 5`` times; no
  interval inside it can be perfect, so the perfect-interval search only looks further left.
* Perfect intervals found inside the window are remembered by start position. When the window
  start passes the oldest start, the newest interval of that start is written out, merged with
  the previous output interval when they are at most ``linker`` apart, and every other interval
  starting before the window start is dropped. (NCBI keeps a linked list of all the intervals;
  one group per start gives the same answers in time bounded by the window, not by the list,
  which grows to thousands of entries in tandem repeats.)
* A full window with at most one distinct triplet (a near-homopolymer) switches to a cheap mode
  that only slides the window and masks it whole. When variety returns, the scan starts again
  at the current window start with fresh state. The scan also starts again on the last window
  of the sequence when it reaches the end (NCBI's outer loop does this), so the letters there,
  and their random N draws, are read twice.

N letters: NCBI's converter owns an unseeded ``CRandom`` (lagged Fibonacci, 33 words, in its
fixed ``Reset()`` state) and draws ``GetRand() & 3`` every time it converts an N, re-reads
included. blastn builds a new masker per query, so every query starts from the same state.
The ``dustmasker`` program differs on sequences with N (it cuts at long N runs first); this
module reproduces blastn, which runs DUST over the whole query.

Positions in the scan are relative to the current scan start, as in NCBI's code; output
intervals are absolute, 0-based and inclusive.
"""

import numpy as np

from .arrays import grown
from .db.crandom import crandom_draw, crandom_reset
from .numba_start import njit
from .refcounts import borrowed

DEFAULT_LEVEL = 20
DEFAULT_WINDOW = 64
DEFAULT_LINKER = 1

_N_CODE = 14  # blastna code of N (see alphabet.py)

# The triplets of the window live in a ring indexed by position & 63 (window <= 64); so do the
# perfect-interval groups below, keyed by their first triplet position.
_RING = 64
_SLOT = _RING - 1


@njit(cache=True, nogil=True)
def _letter(code: np.uint8, rng: np.ndarray) -> np.int64:
    """blastna code to DUST's 2-bit letter; N costs one random draw."""
    if code == 1 or code == 2 or code == 3:
        return np.int64(code)
    if code == _N_CODE:
        return crandom_draw(rng) & 3
    return np.int64(0)


def rng_draws(count: int) -> np.ndarray:
    """The first `count` GetRand() values of a CRandom in its Reset() state (for tests)."""
    return _rng_draws(count)


@njit(cache=True, nogil=True)
def _rng_draws(count):
    rng = crandom_reset()
    out = np.empty(count, dtype=np.int64)
    for i in range(count):
        out[i] = crandom_draw(rng)
    return out


# ---------------------------------------------------------------- perfect-interval groups
#
# NCBI keeps the perfect intervals of the window in a list ordered by start. Only two things
# are ever read from it: the best score/length ratio among the intervals starting at or after
# a position, and, when the window passes a start, the end of the newest interval with that
# start. So we keep one group per start position (a ring slot): whether it is live, its start,
# the end of its newest interval and the best (score, length) pair among its intervals.
# Length 0 means an infinite ratio; the pair (0, 0) (a near-homopolymer window) means "no
# ratio", exactly as NCBI's comparisons treat them.

@njit(cache=True, nogil=True)
def _ratio_greater(score_a, len_a, score_b, len_b):
    """score_a / len_a > score_b / len_b, compared as NCBI does (cross-multiplied)."""
    return len_b * score_a > score_b * len_a


@njit(cache=True, nogil=True)
def _group_add(g_live, g_first, g_last, g_score, g_len, first, last, score, length):
    """Record an interval [first, last]; its ratio is at least that of its group's others."""
    slot = first & _SLOT
    if g_live[slot] == 0 or g_first[slot] != first:
        g_live[slot] = 1
        g_first[slot] = first
    g_last[slot] = last
    g_score[slot] = score
    g_len[slot] = length


@njit(cache=True, nogil=True)
def _groups_clear(g_live):
    g_live[:] = 0


@njit(cache=True, nogil=True)
def _is_group(g_live, g_first, pos):
    slot = pos & _SLOT
    return g_live[slot] != 0 and g_first[slot] == pos


# ---------------------------------------------------------------- output intervals

@njit(cache=True, nogil=True)
def _append_masked(res, n_res, first, last, linker):
    """Add [first, last] to the output, merging with the previous interval when close; `res`
    must have room for one more row. Returns the new row count."""
    if n_res > 0 and res[n_res - 1, 1] + linker >= first:
        if last > res[n_res - 1, 1]:
            res[n_res - 1, 1] = last
        return n_res
    res[n_res, 0] = first
    res[n_res, 1] = last
    return n_res + 1


@njit(cache=True, nogil=True)
def _group_before(g_live, g_first, lowest, window_start):
    """Is an interval starting before the window still recorded? (`lowest` is the smallest
    start that may be.)"""
    for pos in range(lowest, window_start):
        if _is_group(g_live, g_first, pos):
            return True
    return False


@njit(cache=True, nogil=True)
def _save_masked(g_live, g_first, g_last, lowest, window_start, res, n_res, offset, linker):
    """The window start has passed the oldest perfect interval: write it out (the newest one
    of that start) and forget every interval that starts before the window. `res` must have
    room for one more row; returns the new row count."""
    emitted = False
    for pos in range(lowest, window_start):
        if _is_group(g_live, g_first, pos):
            if not emitted:
                n_res = _append_masked(res, n_res, pos + offset,
                                       g_last[pos & _SLOT] + offset, linker)
                emitted = True
            g_live[pos & _SLOT] = 0
    return n_res


# ---------------------------------------------------------------- the window

# What a window shift reports.
_SHIFTED = 0           # ordinary shift
_BECAME_UNIFORM = 1    # the full window now has at most one distinct triplet
_STILL_UNIFORM = 2     # slid a near-homopolymer window, still at most one distinct triplet
_VARIETY_BACK = 3      # slid a near-homopolymer window, variety has returned


@njit(cache=True, nogil=True)
def _add_triplet(counts, t):
    """Count one more t; returns how much the running score grows."""
    grow = counts[t]
    counts[t] += 1
    return grow


@njit(cache=True, nogil=True)
def _remove_triplet(counts, t):
    """Count one fewer t; returns how much the running score shrinks."""
    counts[t] -= 1
    return counts[t]


@njit(cache=True, nogil=True)
def _shift_window(t, ring, c_w, c_v, w_start, w_stop, low_l, r_w, r_v, n_diff,
                  max_size, low_k):
    """Append triplet t, dropping the oldest from a full window, and keep every triplet's
    multiplicity in the suffix [low_l, w_stop) at most low_k.
    Returns (what happened, w_start, w_stop, low_l, r_w, r_v, n_diff)."""
    uniform_slide = False
    if w_stop - w_start >= max_size:
        # a full window of one distinct triplet slides without suffix bookkeeping
        uniform_slide = n_diff <= 1
        s = ring[w_start & _SLOT]
        r_w -= _remove_triplet(c_w, s)
        if c_w[s] == 0:
            n_diff -= 1
        if not uniform_slide and low_l == w_start:
            low_l += 1
            r_v -= _remove_triplet(c_v, s)
        w_start += 1

    ring[w_stop & _SLOT] = t
    if c_w[t] == 0:
        n_diff += 1
    r_w += _add_triplet(c_w, t)
    w_stop += 1
    if uniform_slide:
        what = _STILL_UNIFORM if n_diff <= 1 else _VARIETY_BACK
        return what, w_start, w_stop, low_l, r_w, r_v, n_diff

    r_v += _add_triplet(c_v, t)
    if c_v[t] > low_k:
        # move the suffix start past the oldest occurrence of t in it
        while True:
            x = ring[low_l & _SLOT]
            r_v -= _remove_triplet(c_v, x)
            low_l += 1
            if x == t:
                break

    what = _SHIFTED
    if w_stop - w_start >= max_size and n_diff <= 1:
        what = _BECAME_UNIFORM
    return what, w_start, w_stop, low_l, r_w, r_v, n_diff


@njit(cache=True, nogil=True)
def _needs_processing(w_start, w_stop, low_l, r_w, thresholds):
    """Only a window scoring above the threshold of the suffix length can hold a perfect
    interval that reaches left of the suffix."""
    suffix_len = w_stop - low_l
    return suffix_len < w_stop - w_start and 10 * r_w > thresholds[suffix_len]


@njit(cache=True, nogil=True)
def _find_perfect(ring, c_v, counts, w_start, w_stop, low_l, r_v, thresholds,
                  g_live, g_first, g_last, g_score, g_len):
    """Grow the suffix leftwards one triplet at a time; record every interval ending at the
    window's last base that scores above threshold and at least as high (per length) as
    every recorded interval it contains."""
    length = w_stop - low_l  # the interval's triplet count minus one, at each step below
    counts[:] = c_v
    score = r_v
    best_score = 0
    best_len = 0
    group_pos = w_stop  # next start position whose intervals join the running best
    last_base = w_stop + 1
    for pos in range(low_l - 1, w_start - 1, -1):
        t = ring[pos & _SLOT]
        seen = counts[t]
        score += _add_triplet(counts, t)
        if seen > 0 and 10 * score > thresholds[length]:
            while group_pos >= pos:
                slot = group_pos & _SLOT
                if _is_group(g_live, g_first, group_pos) and (
                        best_score == 0 or _ratio_greater(g_score[slot], g_len[slot],
                                                          best_score, best_len)):
                    best_score = g_score[slot]
                    best_len = g_len[slot]
                group_pos -= 1
            if best_score == 0 or not _ratio_greater(best_score, best_len, score, length):
                best_score = score
                best_len = length
                _group_add(g_live, g_first, g_last, g_score, g_len,
                           pos, last_base, score, length)
        length += 1


# ---------------------------------------------------------------- the scan

@njit(cache=True, nogil=True)
def _thresholds(level, window):
    """Score-sum thresholds by interval length minus one: 10 * score must exceed them."""
    thresholds = np.empty(window - 2, dtype=np.int64)
    thresholds[0] = 1
    for i in range(1, window - 2):
        thresholds[i] = i * level
    return thresholds


@njit(cache=True, nogil=True)
def _workspace():
    """_symdust_in's window and groups, for any number of sequences in turn."""
    return (np.zeros(_RING, dtype=np.int64), np.zeros(64, dtype=np.int64),
            np.zeros(64, dtype=np.int64), np.zeros(64, dtype=np.int64),
            np.zeros(_RING, dtype=np.int8), np.zeros(_RING, dtype=np.int64),
            np.zeros(_RING, dtype=np.int64), np.zeros(_RING, dtype=np.int64),
            np.zeros(_RING, dtype=np.int64))


@njit(cache=True, nogil=True)
def _symdust(codes, level, window, linker):
    ring, c_w, c_v, counts, g_live, g_first, g_last, g_score, g_len = _workspace()
    res = _rows_for(codes.shape[0])
    n_res = _symdust_in(codes, level, window, linker, _thresholds(level, window),
                        crandom_reset(), ring, c_w, c_v, counts, g_live, g_first, g_last,
                        g_score, g_len, res)
    return res[:n_res].copy()


@njit(cache=True, nogil=True)
def _rows_for(letters):
    """Room for every interval of a sequence of `letters` letters (each starts at a letter
    of its own): a buffer grown inside the loop over the letters would be counted in and out
    on every letter. Its pages are only touched where rows are written."""
    return np.empty((letters + 1, 2), dtype=np.int64)


@njit(cache=True, nogil=True)
def _symdust_in(codes, level, window, linker, thresholds, rng, ring, c_w, c_v, counts,
                g_live, g_first, g_last, g_score, g_len, res):
    """_symdust with its work arrays given, its intervals written into `res` (_rows_for the
    sequence); returns their count. The functions its loop over the letters calls take the
    arrays borrowed, not counted in and out (atomic operations) on every call, a dozen a
    letter."""
    thresholds, rng, ring, c_w, c_v = (borrowed(thresholds), borrowed(rng), borrowed(ring),
                                       borrowed(c_w), borrowed(c_v))
    counts, g_live, g_first, g_last = borrowed(counts), borrowed(g_live), borrowed(g_first), \
        borrowed(g_last)
    g_score, g_len, res = borrowed(g_score), borrowed(g_len), borrowed(res)
    n = codes.shape[0]
    n_res = 0
    max_size = window - 2
    low_k = level // 5

    start = 0
    stop = n - 1
    while stop > start + 2:  # at least one triplet and one more base
        # a fresh window at `start`; positions below are relative to it
        c_w[:] = 0
        c_v[:] = 0
        _groups_clear(g_live)
        w_start = w_stop = low_l = r_w = r_v = n_diff = lowest = 0
        first = _letter(codes[start], rng)
        t = (first << 2) + _letter(codes[start + 1], rng)
        pos = start + 2
        variety_back = False
        while not variety_back and pos <= stop:
            if _group_before(g_live, g_first, lowest, w_start):
                n_res = _save_masked(g_live, g_first, g_last, lowest, w_start,
                                     res, n_res, start, linker)
            lowest = max(lowest, w_start)
            t = ((t << 2) & 63) + _letter(codes[pos], rng)
            what, w_start, w_stop, low_l, r_w, r_v, n_diff = _shift_window(
                t, ring, c_w, c_v, w_start, w_stop, low_l, r_w, r_v, n_diff, max_size, low_k)
            if what == _SHIFTED:
                pos += 1
                if _needs_processing(w_start, w_stop, low_l, r_w, thresholds):
                    _find_perfect(ring, c_v, counts, w_start, w_stop, low_l, r_v, thresholds,
                                  g_live, g_first, g_last, g_score, g_len)
            elif what == _BECAME_UNIFORM:
                # the whole window replaces every interval found so far
                pos += 1
                _groups_clear(g_live)
                lowest = w_start
                _group_add(g_live, g_first, g_last, g_score, g_len, w_start, w_stop + 1, 0, 0)
            elif what == _STILL_UNIFORM:
                pos += 1
                _group_add(g_live, g_first, g_last, g_score, g_len, w_start, w_stop + 1, 0, 0)
            else:
                # variety is back: scan again from this window's start (its letters re-read)
                variety_back = True

        # the window reached the end (or variety came back): write out what is left
        for p in range(lowest, w_stop + 1):
            if _is_group(g_live, g_first, p):
                n_res = _append_masked(res, n_res, p + start,
                                       g_last[p & _SLOT] + start, linker)

        if w_start > 0:
            start += w_start
        else:
            break
    return n_res


def dust_intervals(codes: np.ndarray, level: int = DEFAULT_LEVEL, window: int = DEFAULT_WINDOW,
                   linker: int = DEFAULT_LINKER) -> np.ndarray:
    """Symmetric-DUST intervals of one query's plus strand, as blastn 2.12 computes them.

    codes: blastna codes (A=0 C=1 G=2 T=3, 4..13 other IUPAC, N=14).
    level, window, linker: DUST parameters; values outside 2..64, 8..64 and 1..32 fall back
    to the defaults, as in NCBI's masker.
    Returns int64 [k, 2]: 0-based inclusive [start, end] rows, in NCBI's output order
    (sorted by start; consecutive rows more than `linker` apart).
    """
    return dust_intervals_many([codes], level, window, linker)[0]


def dust_intervals_many(sequences: list, level: int = DEFAULT_LEVEL,
                        window: int = DEFAULT_WINDOW, linker: int = DEFAULT_LINKER) -> list:
    """dust_intervals of each sequence, in one compiled call: a thread masking many short
    queries takes the GIL twice, not twice per query."""
    if not sequences:
        return []
    level = int(level) if 2 <= int(level) <= 64 else DEFAULT_LEVEL
    window = int(window) if 8 <= int(window) <= 64 else DEFAULT_WINDOW
    linker = int(linker) if 1 <= int(linker) <= 32 else DEFAULT_LINKER
    ends = np.cumsum([len(codes) for codes in sequences], dtype=np.int64)
    joined = np.concatenate([np.asarray(codes, dtype=np.uint8) for codes in sequences])
    intervals, counts = _symdust_each(joined, ends, np.int64(level), np.int64(window),
                                      np.int64(linker))
    return np.split(intervals, np.cumsum(counts)[:-1])


@njit(cache=True, nogil=True)
def _symdust_each(joined, ends, level, window, linker):
    """_symdust of each joined[ends[i - 1]:ends[i]]: all the intervals, and each one's count."""
    out = np.empty((64, 2), dtype=np.int64)
    n_out = 0
    counts = np.zeros(ends.size, dtype=np.int64)
    thresholds = _thresholds(level, window)
    ring, c_w, c_v, triplets, g_live, g_first, g_last, g_score, g_len = _workspace()
    longest = 0
    for i in range(ends.size):
        longest = max(longest, ends[i] - (ends[i - 1] if i else 0))
    rows = _rows_for(longest)
    start = 0
    for i in range(ends.size):
        found = rows[:_symdust_in(joined[start:ends[i]], level, window, linker, thresholds,
                                  crandom_reset(), ring, c_w, c_v, triplets, g_live,
                                  g_first, g_last, g_score, g_len, rows)]
        counts[i] = found.shape[0]
        out = grown(out, n_out + found.shape[0])
        out[n_out:n_out + found.shape[0]] = found
        n_out += found.shape[0]
        start = ends[i]
    return out[:n_out], counts
