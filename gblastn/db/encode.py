"""One sequence's letters to the database's stored form: 2-bit bases with makeblastdb's
substitutes at ambiguous positions, plus the ambiguity runs that restore the true letters.

Runs are maximal stretches of one ncbi4na code (not split at 4096 as BLAST's file format must);
offsets and lengths are in bases. A '-' (gap) is stored as N, as makeblastdb does.
"""

import numpy as np

from ..alphabet import BLASTNA_FROM_ASCII, INVALID, NCBI4NA_FROM_BLASTNA
from ..numba_start import njit
from .crandom import crandom_new, substitute_base


def _ascii_to_ncbi4na() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint8)  # 0 marks a byte that is not a letter
    valid = BLASTNA_FROM_ASCII != INVALID
    table[valid] = NCBI4NA_FROM_BLASTNA[BLASTNA_FROM_ASCII[valid]]
    return table


NCBI4NA_FROM_ASCII = _ascii_to_ncbi4na()
# ncbi4na -> 2-bit base for the four unambiguous codes; 255 for the ambiguous ones
TWO_BIT_FROM_NCBI4NA = np.full(16, 255, dtype=np.uint8)
TWO_BIT_FROM_NCBI4NA[[1, 2, 4, 8]] = [0, 1, 2, 3]


SEGMENT_LETTERS = 1 << 23  # letters packed per task (a multiple of 4)


@njit(cache=True, nogil=True)
def _pack_segment(letters, lo, hi, to_ncbi4na, to_two_bit, packed):
    """Pack letters [lo, hi) (lo a multiple of 4) into `packed`, four to a byte; an ambiguous
    letter is packed as 0 for now. Returns the number of ambiguous letters."""
    ambiguous = 0
    i = lo
    while i < hi:
        byte = 0
        for k in range(4):
            base = 0
            if i + k < hi:
                base = to_two_bit[to_ncbi4na[letters[i + k]]]
                if base == 255:
                    ambiguous += 1
                    base = 0
            byte = (byte << 2) | base
        packed[i >> 2] = byte
        i += 4
    return ambiguous


@njit(cache=True, nogil=True)
def _ambiguous_positions(letters, lo, hi, to_ncbi4na, to_two_bit, count):
    """The `count` positions in [lo, hi) of letters that are not A, C, G or T."""
    out = np.empty(count, dtype=np.int64)
    n = 0
    for i in range(lo, hi):
        if to_two_bit[to_ncbi4na[letters[i]]] == 255:
            out[n] = i
            n += 1
    return out


@njit(cache=True, nogil=True)
def _substitute(letters, positions, to_ncbi4na, packed):
    """makeblastdb's substitutes, drawn from CRandom(length) in sequence order, packed at the
    ambiguous positions; returns the runs as rows (offset, length, code)."""
    state = crandom_new(letters.size)
    runs = np.empty((positions.size, 3), dtype=np.int64)
    count = 0
    last = np.int64(-2)
    previous = 0
    for j in range(positions.size):
        i = positions[j]
        code = to_ncbi4na[letters[i]]
        if i != last + 1 or code != previous:
            runs[count, 0] = i
            runs[count, 1] = 0
            runs[count, 2] = code
            count += 1
        runs[count - 1, 1] += 1
        last = i
        previous = code
        base = substitute_base(state, code)
        packed[i >> 2] |= np.uint8(base << (6 - 2 * (i & 3)))
    return runs[:count]


def encode_sequence(letters: np.ndarray, pool=None):
    """(packed uint8 [ceil(n/4)], run offsets int64, run lengths int64, run codes uint8).

    `letters` are validated ASCII IUPAC letters (either case). Segments of a long sequence
    are packed in parallel on `pool` (a TaskPool); substitutes are drawn after, in order."""
    letters = np.asarray(letters, dtype=np.uint8)
    packed = np.empty((letters.size + 3) // 4, dtype=np.uint8)
    bounds = [(lo, min(lo + SEGMENT_LETTERS, letters.size))
              for lo in range(0, letters.size, SEGMENT_LETTERS)]

    def pack(segment):
        return _pack_segment(letters, segment[0], segment[1], NCBI4NA_FROM_ASCII,
                             TWO_BIT_FROM_NCBI4NA, packed)

    counts = pool.map(pack, bounds) if pool is not None else [pack(b) for b in bounds]
    positions = [_ambiguous_positions(letters, lo, hi, NCBI4NA_FROM_ASCII,
                                      TWO_BIT_FROM_NCBI4NA, count)
                 for (lo, hi), count in zip(bounds, counts) if count]
    if not positions:
        empty = np.zeros(0, dtype=np.int64)
        return packed, empty, empty.copy(), np.zeros(0, dtype=np.uint8)
    runs = _substitute(letters, np.concatenate(positions), NCBI4NA_FROM_ASCII, packed)
    return packed, runs[:, 0].copy(), runs[:, 1].copy(), runs[:, 2].astype(np.uint8)
