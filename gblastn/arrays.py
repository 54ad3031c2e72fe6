"""Arrays in compiled code: a buffer grown as it fills."""

import numpy as np

from .numba_start import njit


@njit(cache=True, nogil=True)
def grown(array, need):
    """`array` itself when it has `need` rows, else a copy into max(need, twice its rows)
    rows (the rows past the copy uninitialised): the amortised doubling of a buffer filled
    in compiled code, as BLAST reallocs its own."""
    if need <= array.shape[0]:
        return array
    out = np.empty((max(need, 2 * array.shape[0]),) + array.shape[1:], dtype=array.dtype)
    out[:array.shape[0]] = array
    return out
