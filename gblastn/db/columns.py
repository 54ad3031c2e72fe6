"""`Column`: numbers that a build appends one sequence at a time (lengths, offsets, hashes).

Kept in fixed-size numpy chunks rather than one array grown by reallocation, which copies the
whole array whenever it moves and needs the old and the new one at once: chunks never move,
and `take` frees them once joined.
"""

import numpy as np

CHUNK_ITEMS = 1 << 16


class Column:
    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self._chunks: list[np.ndarray] = []
        self._used = CHUNK_ITEMS  # items used in the last chunk
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        return self._chunks[index // CHUNK_ITEMS][index % CHUNK_ITEMS].item()

    def append(self, value) -> None:
        if self._used == CHUNK_ITEMS:
            self._chunks.append(np.empty(CHUNK_ITEMS, dtype=self.dtype))
            self._used = 0
        self._chunks[-1][self._used] = value
        self._used += 1
        self.size += 1

    def extend(self, values: np.ndarray) -> None:
        done = 0
        while done < values.size:
            if self._used == CHUNK_ITEMS:
                self._chunks.append(np.empty(CHUNK_ITEMS, dtype=self.dtype))
                self._used = 0
            count = min(CHUNK_ITEMS - self._used, values.size - done)
            self._chunks[-1][self._used:self._used + count] = values[done:done + count]
            self._used += count
            done += count
        self.size += values.size

    def take(self) -> np.ndarray:
        """Every value in one array; the column is empty after (its chunks freed)."""
        if not self._chunks:
            return np.zeros(0, dtype=self.dtype)
        self._chunks[-1] = self._chunks[-1][:self._used]
        joined = np.concatenate(self._chunks)
        self._chunks, self._used, self.size = [], CHUNK_ITEMS, 0
        return joined
