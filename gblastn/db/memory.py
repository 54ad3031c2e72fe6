"""A database of one volume held in memory: subjects of bases only (no ambiguity codes),
given as 2-bit codes. It offers what the search's stages read of a database and of its
volumes (reader.Database, reader.Volume), being both: the warm-up searches one."""

import numpy as np

from ..alphabet import pack_2bit
from .reader import PackedSubjects


def _read_only(array: np.ndarray) -> np.ndarray:
    """As a volume's arrays are (LMDB's memory), so that the same compiled code serves both."""
    array.flags.writeable = False
    return array


class MemoryVolume:
    """Subjects 0 .. n - 1, each packed from a byte boundary in one read-only buffer."""

    first_ordinal = 0
    searched = None  # every subject is searched

    def __init__(self, subjects: list):
        codes = [np.asarray(s, dtype=np.uint8) for s in subjects]
        packed = [pack_2bit(c) for c in codes]
        self.lengths = np.array([c.size for c in codes], dtype=np.int64)
        self.num_seqs, self.total_letters = len(codes), int(self.lengths.sum())
        self.stats_num_seqs, self.stats_letters = self.num_seqs, self.total_letters
        self.volumes = [self]
        byte_offset = np.zeros(len(packed) + 1, dtype=np.int64)
        np.cumsum([p.size for p in packed], out=byte_offset[1:])
        self._concat = (_read_only(np.concatenate(packed)), byte_offset)
        none = _read_only(np.zeros(0, dtype=np.int64))
        self._packed_subjects = PackedSubjects(
            *self._concat, self.lengths, _read_only(np.zeros(self.num_seqs + 1, np.int64)),
            none, none, np.zeros(0, dtype=np.int64), _read_only(np.zeros(0, dtype=np.uint8)))

    def concat_packed(self) -> tuple:
        return self._concat

    def packed_subjects(self) -> PackedSubjects:
        return self._packed_subjects

    def bases_only(self, local: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Every window holds bases only: these subjects have no ambiguity codes."""
        return np.ones(len(local), dtype=bool)
