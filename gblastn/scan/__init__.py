"""Scanning backends: the subject chunks against a lookup table, giving W-seeds.

The backend contract (``backend.py``; CPU reference in ``cpu.py``; the GPU backend returns
identical arrays):

A seed is what BLAST hands to the diagonal stage (``s_Blastn*ExtendInitialHit``) after the
scan, the expansion of each table hit to its query offsets, the mini-extension to a full
W-mer (the routine BLAST picks for the table, §4.2), and the s_TypeOfWord check. Seeds that
s_TypeOfWord rejects are dropped here (the check does not depend on diagonal state).

Order: by chunk, then by the subject offset of the original w-mer hit (``hit_s``), then in
the order the table lists the query offsets of a word (megablast: decreasing query offset;
small and standard: increasing). The last key only matters for the diagonal *hash* (queries
longer than 8000 letters), whose cell reuse depends on the order of insertions.
"""

from dataclasses import dataclass

import numpy as np


@dataclass
class Seeds:
    """Seeds as arrays, in the order of their rows in gblastn.layouts (SEED_*)."""

    chunk: np.ndarray    # int32, chunk index
    q_off: np.ndarray    # int32, concatenated query offset of the seed start (after s_TypeOfWord)
    s_off: np.ndarray    # int32, chunk-relative subject offset of the seed start (after s_TypeOfWord)
    s_first: np.ndarray  # int32, seed start before s_TypeOfWord slid it right; BLAST tests this
                         # against the diagonal's last_hit and uses it for hash staleness
    hit_s: np.ndarray    # int32, subject offset of the w-mer hit that produced the seed

    def __len__(self) -> int:
        return int(self.chunk.size)

    @staticmethod
    def empty() -> "Seeds":
        z = np.zeros(0, dtype=np.int32)
        return Seeds(z, z.copy(), z.copy(), z.copy(), z.copy())

    def of_chunks(self, first: int, end: int) -> "Seeds":
        """The seeds of chunks [first, end), renumbered from 0."""
        lo, hi = np.searchsorted(self.chunk, [first, end])
        return Seeds(self.chunk[lo:hi] - np.int32(first), self.q_off[lo:hi], self.s_off[lo:hi],
                     self.s_first[lo:hi], self.hit_s[lo:hi])

    def equals(self, other: "Seeds") -> bool:
        return all(np.array_equal(getattr(self, f), getattr(other, f))
                   for f in ("chunk", "q_off", "s_off", "s_first", "hit_s"))


def select_backend(device: str, gpu_id: int = 0, times=None):
    """The scan backend (a backend.Backend) for ``-device`` (auto, gpu or cpu) and
    ``-gpu_id``. See ``device.select``."""
    from .device import select
    return select(device, gpu_id, times)
