"""Arrays: a buffer grown as it fills in compiled code, parts' fields joined, arrays in
fresh anonymous memory, such buffers used again once let go, and records of arrays packed
for another process."""

import mmap
import sys
from dataclasses import dataclass, fields

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


@dataclass
class PackedRecords:
    """Records of one dataclass whose fields are arrays or None (Hsps, TailsAhead), each
    under a key (a row of ints), as one structure of arrays: what a worker sends another. A
    list of records pickles array by array, and Dask ships each array as a frame of its own:
    2,000 frames and 25 ms a hop for 160 subjects; a replicated batch's traceback share of
    tens of thousands of subjects took seconds of both workers' GIL."""

    kind: type          # the records' dataclass
    keys: np.ndarray    # int64 [records, key length]
    arrays: dict        # field -> the records' arrays end to end; None where none has it
    bounds: dict        # field -> int64 [records + 1]: record i's rows of arrays[field]
    present: dict       # field -> bool [records]: whether record i has that field

    @classmethod
    def of(cls, kind: type, keyed: list) -> "PackedRecords":
        """[(key, record)] packed: each key a tuple of ints, all of one length; a field's
        arrays all of one dtype and the same shape but for their first dimension."""
        keys = np.array([key for key, _ in keyed] or np.zeros((0, 0)), dtype=np.int64)
        arrays, bounds, present = {}, {}, {}
        for name in (f.name for f in fields(kind)):
            parts = [getattr(record, name) for _, record in keyed]
            present[name] = np.array([part is not None for part in parts], dtype=bool)
            sizes = [0 if part is None else len(part) for part in parts]
            bounds[name] = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
            given = [part for part in parts if part is not None]
            arrays[name] = np.concatenate(given) if given else None
        return cls(kind, keys, arrays, bounds, present)

    def unpacked(self) -> list:
        """[(key, record)] as packed: each field a view of the packed arrays (None where the
        record had none)."""
        columns = {name: (self.arrays[name], self.bounds[name].tolist(),
                          self.present[name].tolist()) for name in self.arrays}
        return [(tuple(key), self.kind(**{name: array[ends[i]:ends[i + 1]] if has[i] else None
                                          for name, (array, ends, has) in columns.items()}))
                for i, key in enumerate(self.keys.tolist())]
