"""A database split into shards, each searched on its own worker with the whole database's
statistics and ordinals, so that the shards' results merge into one search's (drivers/cluster.py).

* DatabaseStatistics: what a single search derives from the whole database (its letters and
  sequence count: the length adjustment, search spaces and cutoffs of stats.py), recorded
  where the search starts and checked by every worker against the database it opened.
* Shard: a set of global ordinals (whole volumes, subject ranges of a volume, or any set).
  Every worker opens the whole database, so a shard's subjects keep their global ordinals,
  which break BLAST's ties, and its statistics are the database's.
* shard_windows: the stretches of the database a shard's scan and ungapped stage run over.
  With a long query batch the ungapped stage's diagonal hash carries its state from subject to
  subject in database order, up to a reset every HASH_OFFSET_LIMIT letters of subject offset
  (ungapped.py): a subject's initial hits then depend on every subject since the last reset.
  A shard's windows start at (or in the subject that holds) the reset before each of its
  subjects, with the hash's offset as one search has it there, and run up to that subject;
  the subjects in a window that the shard does not hold are scanned for the hash's sake
  only. contiguous_shards cuts the database at resets where it has enough of them, so
  that its shards replay nothing.
"""

from dataclasses import dataclass, field

import zlib

import numpy as np

from .errors import DatabaseError
from .numba_start import njit


@dataclass(frozen=True)
class DatabaseStatistics:
    """The whole database as a single search sees it: its letters and sequences (the
    statistics' database size), its volumes and a checksum of its sequence lengths (which
    also fix its chunks and the diagonal hash's resets). A worker that opened another
    database under the same name is refused."""

    letters: int
    num_seqs: int
    volumes: int
    lengths_checksum: int

    @classmethod
    def of(cls, db) -> "DatabaseStatistics":
        lengths = np.ascontiguousarray(db.lengths, dtype=np.int64)
        return cls(int(db.stats_letters), int(db.stats_num_seqs), len(db.volumes),
                   zlib.crc32(lengths.view(np.uint8)))

    def check(self, found: "DatabaseStatistics", name: str) -> None:
        """Refuses `found`, the statistics of the database a worker opened as `name`, unless
        they are these."""
        if found != self:
            raise DatabaseError(f"the database {name} a worker opened is not the one the search "
                                f"opened ({found.num_seqs:,} sequences and {found.letters:,} "
                                f"letters, not {self.num_seqs:,} and {self.letters:,}): "
                                "give every host the same database at the same path")


@dataclass(frozen=True)
class Shard:
    """Part of a database: `ordinals`, sorted global ordinals; `index` its place among the
    search's shards."""

    index: int
    ordinals: np.ndarray = field(compare=False)

    @property
    def key(self) -> tuple:
        """Names the shard's subjects, for what a worker keeps between searches."""
        return (self.ordinals.size, hash(self.ordinals.tobytes()))

    def letters(self, db) -> int:
        return int(np.asarray(db.lengths, dtype=np.int64)[self.ordinals].sum())


@dataclass(frozen=True)
class ContiguousShard:
    """Shard `index` of a database's `count` contiguous shards (contiguous_shards), named
    rather than held: each worker cuts them once from its own copy of the database."""

    index: int
    count: int


@dataclass
class PackedHitLists:
    """A shard's preliminary hit lists ({query index: RankedSubjects}) as one RankedSubjects,
    query after query: sent to every shard's traceback as a few arrays, not three a query
    (Dask ships each array as a frame of its own)."""

    queries: np.ndarray  # int64: the query indices, in the lists' order
    bounds: np.ndarray   # int64 [queries + 1]: query k's rows of `keys`
    keys: object         # engine.RankedSubjects

    @classmethod
    def of(cls, lists: dict) -> "PackedHitLists":
        from .engine import RankedSubjects

        sizes = [ranked.ordinal.size for ranked in lists.values()]
        keys = RankedSubjects.joined(list(lists.values())) if lists else \
            RankedSubjects(np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.int64))
        return cls(np.array(list(lists), dtype=np.int64),
                   np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))), keys)

    def unpacked(self) -> dict:
        """The lists as packed, in their order, each a view of the packed keys."""
        ends = self.bounds.tolist()
        return {q: self.keys.take(slice(ends[k], ends[k + 1]))
                for k, q in enumerate(self.queries.tolist())}


def shards_of(assignment: np.ndarray) -> list:
    """Shards from a shard number per ordinal (any assignment); empty shards are left out."""
    assignment = np.asarray(assignment, dtype=np.int64)
    return [Shard(k, np.flatnonzero(assignment == number))
            for k, number in enumerate(np.unique(assignment))]


def contiguous_shards(db, count: int, resets: "HashResets | None" = None) -> list:
    """`count` (at most one a subject) runs of successive subjects of about equal letters.
    Where the database has a diagonal-hash reset at a subject's start near each cut, the
    cuts are made there, so that no shard replays another's subjects (shard_windows); else
    at volume boundaries where there are enough, which keep a shard's volumes to itself.
    `resets`: the database's HashResets of one-hit searches (window 0), when already made;
    the cuts serve every search, which replays what its own resets ask (shard_windows)."""
    lengths = np.asarray(db.lengths, dtype=np.int64)
    count = contiguous_count(count, lengths.size)
    if count == 1:
        return [Shard(0, np.arange(lengths.size, dtype=np.int64))]
    ends = np.cumsum(lengths)
    targets = ends[-1] * np.arange(1, count) / count
    resets = resets if resets is not None else hash_resets(db)
    for candidates in (_clean_starts(resets), np.array([v.first_ordinal for v in db.volumes][1:],
                                                       dtype=np.int64)):
        if candidates.size >= count - 1:
            cuts = _nearest_cuts(candidates, ends, targets)
            if cuts.size == count - 1:
                break
    else:
        cuts = _distinct_cuts(np.searchsorted(ends, targets, side="left") + 1, lengths.size)
    bounds = [0, *cuts.tolist(), int(lengths.size)]
    return [Shard(k, np.arange(a, b, dtype=np.int64))
            for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]


def contiguous_count(count: int, num_seqs: int) -> int:
    """How many shards contiguous_shards cuts when asked for `count`: one a subject at most."""
    return max(1, min(int(count), int(num_seqs)))


def _distinct_cuts(cuts: np.ndarray, n: int) -> np.ndarray:
    """Cuts in [1, n) made strictly increasing, each as near its place as the others allow:
    every shard gets a subject at least."""
    made = []
    for k, cut in enumerate(cuts.tolist()):
        low = made[-1] + 1 if made else 1
        made.append(min(max(cut, low), n - (cuts.size - k)))
    return np.array(made, dtype=np.int64)


def _nearest_cuts(candidates: np.ndarray, ends: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """For each target (letters), the candidate first ordinal whose start is nearest; the
    distinct ones, in order."""
    starts = np.concatenate([[0], ends])[candidates]
    nearest = np.abs(starts[None, :] - targets[:, None]).argmin(axis=1)
    return np.unique(candidates[nearest])


# ----------------------------------------------------------------------------------------------
# the diagonal hash's resets


@dataclass
class HashResets:
    """Where one search's diagonal hash stands at each subject: `offset`, its subject offset
    at the subject's first chunk, and `replay_from`, the first subject of the stretch the
    subject's first chunk lies in (the subject holding the chunk after the last reset)."""

    offset: np.ndarray       # int64 per subject
    replay_from: np.ndarray  # int64 per subject


@njit(cache=True, nogil=True)
def _hash_walk(chunk_subject, chunk_length, first_chunk, limit, window):
    """ungapped.extend_chunks' walk of the hash offset over every chunk of the database in
    order (a fresh hash at the two-hit window, each chunk its length and the window further
    on): the offset at each subject's first chunk, and the subject whose chunk is the
    latest with a fresh hash at or before it."""
    n = first_chunk.size
    offset_at = np.zeros(n, dtype=np.int64)
    replay_from = np.zeros(n, dtype=np.int64)
    offset = np.int64(window)
    fresh_subject = np.int64(0)
    subject = -1
    fresh = False
    for c in range(chunk_subject.size):
        s = chunk_subject[c]
        if c == 0 or fresh:
            fresh_subject = s
        if s != subject:
            subject = s
            offset_at[s] = offset
            replay_from[s] = fresh_subject
        fresh = offset >= limit
        if fresh:
            offset = window
        else:
            offset += chunk_length[c] + window
    return offset_at, replay_from


def hash_resets(db, window: int = 0) -> HashResets:
    """HashResets of every subject of `db`, from its chunks (engine.subject_chunks), for
    searches with this two-hit window."""
    from .engine import subject_chunks
    from .ungapped import HASH_OFFSET_LIMIT

    lengths = np.asarray(db.lengths, dtype=np.int64)
    chunks = subject_chunks(lengths, np.zeros(lengths.size, dtype=np.int64))
    first_chunk = np.searchsorted(chunks.local_index, np.arange(lengths.size))
    offset, replay_from = _hash_walk(chunks.local_index.astype(np.int64),
                                     chunks.length.astype(np.int64), first_chunk,
                                     np.int64(HASH_OFFSET_LIMIT), np.int64(window))
    return HashResets(offset, replay_from)


def _clean_starts(resets: HashResets) -> np.ndarray:
    """Subjects (not the first) whose first chunk starts with a fresh hash."""
    subjects = np.arange(resets.offset.size)
    return subjects[(subjects > 0) & (resets.replay_from == subjects) & (resets.offset == 0)]


@dataclass
class ShardWindow:
    """Successive subjects [first, end) searched through one diagonal hash that starts empty
    at `hash_offset`: (volume, local subject range) pieces in database order."""

    first: int
    end: int
    hash_offset: int
    pieces: list


def shard_windows(db, ordinals: np.ndarray, replay: bool, resets: HashResets | None = None) \
        -> list:
    """The ShardWindows that give the subjects `ordinals` (sorted) the initial hits one
    search gives them: without `replay` (a batch searched with the diagonal array, which
    keeps nothing from one chunk to the next) their runs of successive subjects; with it,
    each subject from the subject its stretch of the hash starts in (HashResets), joined
    where they overlap."""
    ordinals = np.asarray(ordinals, dtype=np.int64)
    if not ordinals.size:
        return []
    resets = resets if resets is not None or not replay else hash_resets(db)
    starts = resets.replay_from[ordinals] if replay else ordinals
    windows, first, end = [], int(starts[0]), int(ordinals[0]) + 1
    for start, ordinal in zip(starts[1:].tolist(), ordinals[1:].tolist()):
        if start > end or (not replay and start != end):
            windows.append((first, end))
            first = start
        end = ordinal + 1
    windows.append((first, end))
    return [ShardWindow(a, b, int(resets.offset[a]) if replay else 0, _volume_pieces(db, a, b))
            for a, b in windows]


def _volume_pieces(db, first: int, end: int) -> list:
    """(volume, local subject range) pieces of ordinals [first, end), in order."""
    pieces = []
    for volume in db.volumes:
        lo = max(first, volume.first_ordinal)
        hi = min(end, volume.first_ordinal + volume.num_seqs)
        if lo < hi:
            pieces.append((volume, range(lo - volume.first_ordinal, hi - volume.first_ordinal)))
    return pieces
