"""One sequence's letters to the database's stored form: 2-bit bases with makeblastdb's
substitutes at ambiguous positions, plus the ambiguity runs that restore the true letters.

Runs are maximal stretches of one ncbi4na code (not split at 4096 as BLAST's file format must);
offsets and lengths are in bases. A '-' (gap) is stored as N, as makeblastdb does.
"""

import numpy as np
from numba import njit

from ..alphabet import BLASTNA_FROM_ASCII, INVALID, NCBI4NA_FROM_BLASTNA
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


@njit(cache=True, nogil=True)
def _encode(letters, to_ncbi4na, to_two_bit, packed, runs):
    """One pass: packs the bases, draws CRandom(length) substitutes at ambiguous positions and
    records the runs (rows of `runs`: offset, length, code; grown by doubling). Returns
    (runs array, run count)."""
    n = letters.size
    count = 0
    previous = 0
    state = np.zeros(1, dtype=np.uint32)
    for i in range(n):
        code = to_ncbi4na[letters[i]]
        base = to_two_bit[code]
        if base == 255:
            if count == 0 and previous == 0 and state.size == 1:
                state = crandom_new(n)  # seeded only for sequences that need it
            if code != previous:
                if count == runs.shape[0]:
                    grown = np.empty((2 * count, 3), dtype=np.int64)
                    grown[:count] = runs
                    runs = grown
                runs[count, 0] = i
                runs[count, 1] = 0
                runs[count, 2] = code
                count += 1
            runs[count - 1, 1] += 1
            previous = code
            base = substitute_base(state, code)
        else:
            previous = 0
        packed[i >> 2] |= np.uint8(base << (6 - 2 * (i & 3)))
    return runs, count


def encode_sequence(letters: np.ndarray):
    """(packed uint8 [ceil(n/4)], run offsets int64, run lengths int64, run codes uint8).

    `letters` are validated ASCII IUPAC letters (either case)."""
    letters = np.asarray(letters, dtype=np.uint8)
    packed = np.zeros((letters.size + 3) // 4, dtype=np.uint8)
    runs, count = _encode(letters, NCBI4NA_FROM_ASCII, TWO_BIT_FROM_NCBI4NA, packed,
                          np.empty((16, 3), dtype=np.int64))
    runs = runs[:count]
    return packed, runs[:, 0].copy(), runs[:, 1].copy(), runs[:, 2].astype(np.uint8)
