"""Arrays: a buffer grown as it fills in compiled code, and parts' fields joined."""

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


def joined_fields(parts: list, count: int) -> list:
    """The `count` fields of `parts` (a list of tuples of arrays, emptied on the way), each
    joined over the parts; a part's field is let go once joined, so that the seeds are held
    about once, not twice, on the way (a batch's seeds of a 5 Mbp chunk may take hundreds of
    MB)."""
    if len(parts) == 1:
        return list(parts[0][:count])
    for k, part in enumerate(parts):
        parts[k] = list(part)
    fields = []
    for i in range(count):
        fields.append(np.concatenate([p[i] for p in parts]))
        for p in parts:
            p[i] = None
    return fields
