"""Arrays: a buffer grown as it fills in compiled code, parts' fields joined, distinct
values, arrays in fresh anonymous memory, and such buffers used again once let go."""

import mmap
import sys

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


def distinct_sorted(values) -> np.ndarray:
    """np.unique(values): the distinct values in ascending order. np.unique checks its
    argument for a masked array, importing numpy.ma (0.014 CPU-s, on the planner's path
    of every search)."""
    ordered = np.sort(np.asarray(values).ravel())
    if ordered.size < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


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


def fresh_pages(count: int, dtype=np.uint8) -> np.ndarray:
    """An uninitialised array of `count` items in fresh anonymous memory of its own: pages
    never written are never faulted in, and all of it goes back to the system when the
    array (and every view of it) is let go. (A large buffer from the allocator may be
    memory it holds already, resident whether written or not.) Small pages: a huge page
    would be faulted in whole."""
    nbytes = int(count) * np.dtype(dtype).itemsize
    if nbytes < mmap.PAGESIZE:
        return np.empty(count, dtype=dtype)
    area = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        area.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(area, dtype=dtype)


def _references(held: list, k: int) -> int:
    return sys.getrefcount(held[k])


_HELD_BY_THE_LIST_ALONE = _references([object()], 0)


class RecycledBuffers:
    """Buffers of one shape in pages of their own (fresh_pages), each handed out again once
    nothing but this holds it or a view of it (its reference count tells: every view of a
    buffer refers to it), so that a buffer's pages are faulted in once, not once per use.
    At most `kept` are kept; while they are all held, free() makes one more for the caller
    alone."""

    def __init__(self, shape: tuple, dtype, kept: int):
        self.shape, self.dtype, self.kept = tuple(shape), np.dtype(dtype), int(kept)
        self._buffers: list = []  # 1-d: the array every view of a buffer refers to

    def free(self) -> np.ndarray:
        """A buffer of `shape` that nothing else holds (its contents: whatever was left)."""
        for k in range(len(self._buffers)):
            if _references(self._buffers, k) == _HELD_BY_THE_LIST_ALONE:
                return self._buffers[k].reshape(self.shape)
        pages = fresh_pages(int(np.prod(self.shape)), self.dtype)
        if len(self._buffers) < self.kept:
            self._buffers.append(pages)
        return pages.reshape(self.shape)
