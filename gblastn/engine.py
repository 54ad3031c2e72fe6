"""One (query batch x volume) search, stage by stage, as BLAST+ 2.12's engine runs it.

The drivers (gblastn/drivers/) only decide where and when these calls run: serial.py one
batch after the other, pipeline.py in threads joined by queues, api.py for the Python API.
The engine takes no lock and keeps no per-thread state: the drivers hand it their pools
(pools.py), the turns their threads take, and each thread's letter buffer; what it runs
beside its caller (the lookup table, the next slice's scan) goes through pools.beside. It
reads its backend's capabilities from the search's BackendPlan (scan/backend.py), resolved
once.

Call hierarchy (each stage its own module):

    query_batches, QueryBatchSizes       (here)         BLAST's query batches (letters per batch)
    plan_batch -> BatchPlan              (here)         what every volume of a batch shares
      build_batch                        query.py       contexts, DUST/lower-case masks, segments
      prepare_statistics                 stats.py       Karlin blocks, search spaces, cutoffs, X-drops
      build_lookup                       lookup.py      small / megablast / standard table
    Engine(db, options, BackendPlan, times, ...)        one search, its backend resolved
      prelim_search -> PrelimHits                       one batch x one volume (or part of one)
        initial_hits -> VolumeGapped
          searched_chunks                (here)         subjects cut in 5,000,000-letter chunks
                                                        (under -db_soft_mask with the ranges
                                                        scanned, -db_hard_mask at the masks)
          find_seeds                     scan/          scan + lookup + mini-extension (CPU or GPU)
            -> ScannedSeeds                             on a GPU with every seed's ungapped
                                                        extension made ahead (cuda/ungapped.cu)
                                                        and the diagonal bookkeeping done
                                                        (initial_hits, cuda/diagonals.cu):
                                                        only the initial hits come back
          extend_seeds                   ungapped.py    diagonal bookkeeping, ungapped X-drop
                                                        (where the seeds came back)
          extensions_ahead               (here)         on a GPU: every hit's score-only gapped
            -> ExtensionsAhead                          extension at once (cuda/greedy.cu,
                                                        cuda/dynprog.cu)
        VolumeGapped.extend_later        gapped.py      score-only gapped extension, in pieces
        VolumeGapped.subject_hits        hsp.py         purge and sort per chunk, chunks of one
                                                        subject merged; E-values, reap, split
                                                        by query
        tails_ahead -> TailsAhead        (here)         on a GPU: the traceback's greedy
                                                        searches, score-only, for where they
                                                        stop, or its DP alignments whole
                                                        (cuda/greedy.cu, cuda/dp_traceback.cu)
      trace_tasks, trace_groups          (here)         the (query, subject) tasks, in groups of
                                                        one volume, the most work first
      trace_group                        (here)
        traceback_group                  traceback.py   letters unpacked around the HSPs, alignment
                                                        on them, then E-values, max_hsps, order,
                                                        counts: one compiled call per group
      query_result                       (here)         subjects in order, max_target_seqs

A database split into shards (shards.py, drivers/cluster.py) is searched shard by shard with
the same stages; prelim_hit_lists gives a shard's preliminary hit lists with BLAST's ranking
keys (RankedSubjects), merged_hit_lists the whole database's, as trace_tasks would cut them.

Stage rules the drivers follow: volume_jobs (a volume's parts for several threads: whole
subjects only) and ungapped_in_database_order (the diagonal hash sees the chunks in database
order, so the jobs take turns at the ungapped stage, once per volume: TurnsOnce; where the
device keeps the hash, the turn starts before the volume's first scan).
"""

import copy
import heapq
import threading
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Callable

import numpy as np

from .arrays import RecycledBuffers, distinct_sorted, fresh_pages
from .hsp import Hsps, QueryResult, SubjectHits, joined, score_order
from .layouts import GAPPED_AHEAD_FIELDS, GAPPED_MADE, SEED_CHUNK, SEED_FIELDS, SEED_HIT_S, \
    SEED_Q_OFF, SEED_S_FIRST, SEED_S_OFF
from .options import SearchOptions
from .pools import INLINE, beside, on_threads, runs_of
from .scan.backend import Backend, BackendPlan, Capabilities, SubjectBuffer
from .timing import StageTimes

if TYPE_CHECKING:
    from .scan import Seeds
    from .ungapped import UngappedAhead

MAX_DBSEQ_LEN = 5_000_000      # BLAST searches longer subjects in chunks of this many letters
DBSEQ_CHUNK_OVERLAP = 100      # ... overlapping by this much
OVERLAP_DIAG_CLOSE = 10        # diagonals within which HSPs of successive chunks are merged


# ----------------------------------------------------------------------------------------------
# query batches


# blastn sizes each query batch from the ungapped extensions the previous one kept
# (blast_app_util's CBatchSizeMixer), on every task of a local search
MIN_TARGET_EXTENSIONS = 1_000_000  # the extensions a batch aims at, at least ...
DB_LETTERS_PER_TARGET_EXTENSION = 3000  # ... or one per this many database letters
FIRST_BATCH_SHARE = 200  # the first batch: the target's letters over this
MIX_IN = 0.3  # the weight of the last batch's extensions per letter against the earlier ones'
SMALLEST_BATCH = 100
# SplitQuery_GetChunkSize's query chunk per task; the largest batch is it less 1,000 letters
QUERY_CHUNK_LETTERS = {"megablast": 5_000_000, "dc-megablast": 5_000_000,
                       "blastn": 1_000_000, "blastn-short": 1_000_000}
CHUNK_LETTERS_KEPT_FREE = 1000


class QueryBatchSizes:
    """The letters of blastn's successive query batches (CBatchSizeMixer): the first holds
    a 200th of the target, in letters (5,000 below 3 Gbp of database); each later one as
    many as, at the extensions per letter seen so far, would keep about the target number
    of ungapped extensions (the last batch's rate weighs 0.3 against the earlier ones'),
    within 100 letters and the task's query chunk less 1,000 (4,999,000; 999,000 for
    blastn and blastn-short). Which queries share a batch decides some hits: a two-hit
    window spans the end of one query and the start of the next in the batch's
    concatenated query."""

    def __init__(self, task: str, db_letters: int):
        self.target = max(MIN_TARGET_EXTENSIONS, db_letters // DB_LETTERS_PER_TARGET_EXTENSION)
        self.largest = QUERY_CHUNK_LETTERS[task] - CHUNK_LETTERS_KEPT_FREE
        self.ratio = -1.0  # extensions per letter, mixed over the batches; negative: none yet
        self.letters = 0
        self._bounded(self.target // FIRST_BATCH_SHARE)

    def searched(self, extensions: int) -> None:
        """The next batch's letters, once a batch kept `extensions` ungapped extensions."""
        self._mix(extensions)

    def after(self, extensions: int) -> "QueryBatchSizes":
        """The sizes as they would be once this batch kept `extensions` (these unchanged)."""
        ahead = copy.copy(self)
        ahead._mix(extensions)
        return ahead

    def _mix(self, extensions: int) -> None:
        ratio = (extensions + 1) / self.letters
        self.ratio = ratio if self.ratio < 0 else MIX_IN * ratio + (1.0 - MIX_IN) * self.ratio
        self._bounded(_int32_truncated(self.target / self.ratio))

    def _bounded(self, letters: int) -> None:
        # a batch size that reaches a bound starts the mixing afresh
        if letters > self.largest:
            self.letters, self.ratio = self.largest, -1.0
        elif letters < SMALLEST_BATCH:
            self.letters, self.ratio = SMALLEST_BATCH, -1.0
        else:
            self.letters = letters


def _int32_truncated(value: float) -> int:
    """A C cast of a positive double to a 32-bit int on x86-64: truncated, and INT_MIN when
    out of range. A first batch without extensions overflows it (10^6 x 5,000), so the
    next batch takes the smallest size, not the largest."""
    return int(value) if value < 2**31 else -2**31


def query_batches(queries, limit: Callable[[], int], size=len):
    """Group queries as blastn's input reader does: add queries until the batch holds at least
    limit() letters (the query that crosses it stays in the batch). limit() is asked as
    each batch's first query comes, after the previous batch was searched (blastn sizes a
    batch from the previous one's extensions: QueryBatchSizes). `queries` may be any
    iterable; `size` gives an item's letter count."""
    batch, letters, batch_limit = [], 0, 0
    for query in queries:
        if not batch:
            batch_limit = limit()
        batch.append(query)
        letters += size(query)
        if letters >= batch_limit:
            yield batch
            batch, letters = [], 0
    if batch:
        yield batch


class ForecastBatches:
    """blastn's query batches (query_batches with `sizes`, a QueryBatchSizes), formed ahead
    of the extension counts that size them, so that several batches' preliminary searches
    can run at once on several workers.

    A batch formed before the count of the one before it is in is a forecast (after the
    first count): its size is blastn's rule run on past the batches not yet counted, each
    taken to keep as many extensions for its size as the last batch counted did. A run of
    batches at one rate keeps its size, and the rule's jumps are foreseen: queries that find
    next to nothing make blastn alternate between its largest and its smallest batch (its
    cast to a 32-bit int overflows), which the last size alone would miss every time. Each
    count, told in batch order, gives the next batch's true size; a forecast holding the
    queries that size would take stands, any other is dropped with every batch formed after
    it, and they are formed again. So the batches handed out and kept are always
    blastn's.

    With `guess_second`, the second batch is formed before the first count too, at the
    largest size: blastn's first batch is small, and unless it keeps next to no extensions
    (the next size then overflows to the smallest) or very many, the next one takes the
    largest size, or every query left. Another worker searches it while the first batch is
    searched, instead of waiting for the first count; a wrong guess is dropped as any
    forecast is."""

    def __init__(self, queries, sizes: "QueryBatchSizes", size=len, guess_second=False):
        self.sizes, self._size, self._guess_second = sizes, size, guess_second
        self._queries = iter(queries)
        self._read: list = []       # queries read, from the first batch not yet counted on
        self._letters: list = []    # their letters
        self._first_index = 0       # the search's index of _read[0]
        self._formed: list = []     # the queries in each formed batch not yet counted
        self._counted_once = False
        self._last_count = (0, 1)   # the last batch counted: (its extensions, its size)

    def next_batch(self) -> tuple | None:
        """(the search's index of its first query, the next batch's queries); None when the
        queries are spent, or when the next batch would be a forecast before any count
        (but the guessed second batch)."""
        if self._formed and not self._counted_once and \
                not (self._guess_second and len(self._formed) == 1):
            return None
        start = sum(self._formed)
        taken = self._batch_length(start, self._forecast_letters())
        if taken == 0:
            return None
        self._formed.append(taken)
        return self._first_index + start, self._read[start:start + taken]

    def counted(self, extensions: int) -> int:
        """The first formed batch kept `extensions` ungapped extensions: the next batch's
        size is known, and forecasts that do not hold its queries are dropped. Returns how
        many formed batches were dropped (the last ones)."""
        done = self._formed.pop(0)
        del self._read[:done], self._letters[:done]
        self._first_index += done
        self._last_count = (extensions, self.sizes.letters)
        self.sizes.searched(extensions)
        self._counted_once = True
        if self._formed and self._batch_length(0, self.sizes.letters) != self._formed[0]:
            dropped = len(self._formed)
            self._formed.clear()
            return dropped
        return 0

    def queries_left(self) -> bool:
        """Whether any query is left after the batches formed (one more is read to know)."""
        return sum(self._formed) < len(self._read) or self._read_one()

    def _forecast_letters(self) -> int:
        """The size of the next batch to form: the true size when every batch before it is
        counted; else QueryBatchSizes run on, each batch formed and not counted taken to
        keep the last count's extensions in proportion to its size; before any count, the
        largest (guess_second)."""
        if self._formed and not self._counted_once:
            return self.sizes.largest
        ahead = self.sizes
        extensions, size = self._last_count
        for _ in self._formed:
            ahead = ahead.after(extensions * ahead.letters // size)
        return ahead.letters

    def _batch_length(self, start: int, limit: int) -> int:
        """How many queries, from read query `start`, a batch of `limit` letters holds (the
        one that crosses it included)."""
        letters, end = 0, start
        while letters < limit:
            if end == len(self._read) and not self._read_one():
                break
            letters += self._letters[end]
            end += 1
        return end - start

    def _read_one(self) -> bool:
        query = next(self._queries, None)
        if query is None:
            return False
        self._read.append(query)
        self._letters.append(self._size(query))
        return True


# ----------------------------------------------------------------------------------------------
# subject chunks


@dataclass
class ScanRanges:
    """The stretches of each chunk that the scan of a soft-masked database reads: chunk i's
    are [left[k], right[k]) for k in first[i]:first[i + 1], in chunk coordinates."""

    first: np.ndarray  # int64 [chunks + 1]
    left: np.ndarray   # int64
    right: np.ndarray  # int64

    def take(self, index) -> "ScanRanges":
        counts = np.diff(self.first)[index]
        ends = np.cumsum(counts, dtype=np.int64)
        total = int(ends[-1]) if ends.size else 0
        # each taken chunk's rows: its first row, then the next ones
        rows = np.repeat(self.first[:-1][index] - (ends - counts), counts) + np.arange(total)
        return ScanRanges(np.concatenate(([0], ends)), self.left[rows], self.right[rows])


@dataclass
class SubjectChunks:
    """The pieces of a volume's subjects that are scanned and extended independently."""

    local_index: np.ndarray   # int32: subject index within the volume
    start: np.ndarray         # int64: first letter of the chunk within its subject
    byte_offset: np.ndarray   # int64: byte of the chunk's first letter in the volume buffer
    length: np.ndarray        # int32: letters
    ranges: ScanRanges | None = None  # what the scan reads of each (None: the whole chunk)

    def take(self, index) -> "SubjectChunks":
        return SubjectChunks(self.local_index[index], self.start[index], self.byte_offset[index],
                             self.length[index],
                             None if self.ranges is None else self.ranges.take(index))


def subject_chunks(lengths: np.ndarray, byte_offset: np.ndarray) -> SubjectChunks:
    """Cut each subject as s_BlastSearchEngineCore does: chunks of MAX_DBSEQ_LEN letters, each
    starting DBSEQ_CHUNK_OVERLAP letters before the previous one ends."""
    lengths = np.asarray(lengths, dtype=np.int64)
    step = MAX_DBSEQ_LEN - DBSEQ_CHUNK_OVERLAP
    counts = np.maximum((lengths - DBSEQ_CHUNK_OVERLAP) // step + 1, 1)
    index = np.repeat(np.arange(lengths.size, dtype=np.int32), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    rank = np.arange(index.size) - first
    start = rank * step
    length = np.minimum(lengths[index] - start, MAX_DBSEQ_LEN)
    # the step is a multiple of 4, so every chunk starts on a byte boundary
    return SubjectChunks(index, start, byte_offset[index] + start // 4, length.astype(np.int32))


def searched_chunks(db, volume, byte_offset: np.ndarray) -> SubjectChunks:
    """The chunks of the volume's subjects that the search sees: those of every subject, or
    of the subjects db.searched marks (-seqidlist), which BLAST's database never hands to
    the scan; under -db_soft_mask with their scan ranges, less those left without one;
    under -db_hard_mask those of the unmasked ranges."""
    masked = getattr(db, "mask_algorithm", None) is not None
    if masked and db.hard_mask:
        chunks = hard_masked_chunks(volume.lengths, byte_offset,
                                    lambda local: db.volume_masked_ranges(volume, local))
    else:
        chunks = subject_chunks(volume.lengths, byte_offset)
    if db.searched is not None:
        chunks = chunks.take(np.flatnonzero(db.searched[volume.first_ordinal
                                                        + chunks.local_index]))
    if not masked or db.hard_mask:
        return chunks
    return soft_masked_chunks(chunks, volume.lengths,
                              lambda local: db.volume_masked_ranges(volume, local))


def hard_masked_chunks(lengths: np.ndarray, byte_offset: np.ndarray, masked_of) -> SubjectChunks:
    """The chunks BLAST cuts the subjects of a hard-masked database into
    (s_GetNextSubjectChunk): each unmasked range of a subject (masked_of(local): its masked
    ranges) in chunks of at most MAX_DBSEQ_LEN letters, overlapping as subject_chunks'
    do, each from the byte boundary at or before its first letter, and scanned from that
    letter on. A chunk without an unmasked letter is left out."""
    local_index, start, length, scan_left = [], [], [], []
    for local, subject_length in enumerate(np.asarray(lengths, dtype=np.int64).tolist()):
        masked = np.asarray(masked_of(local), dtype=np.int64).reshape(-1, 2)
        for left, right in zip(np.append(0, masked[:, 1]).tolist(),
                               np.append(masked[:, 0], subject_length).tolist()):
            following = left
            while following < right:
                residual = following % 4
                offset = following - residual
                if offset + MAX_DBSEQ_LEN < right:
                    size, following = MAX_DBSEQ_LEN, offset + MAX_DBSEQ_LEN - DBSEQ_CHUNK_OVERLAP
                else:
                    size, following = right - offset, right
                if size > residual:
                    local_index.append(local)
                    start.append(offset)
                    length.append(size)
                    scan_left.append(residual)
    local_index = np.asarray(local_index, dtype=np.int32)
    start = np.asarray(start, dtype=np.int64)
    length = np.asarray(length, dtype=np.int64)
    ranges = ScanRanges(np.arange(length.size + 1, dtype=np.int64),
                        np.asarray(scan_left, dtype=np.int64), length.copy())
    return SubjectChunks(local_index, start, np.asarray(byte_offset)[local_index] + start // 4,
                         length.astype(np.int32), ranges)


def soft_masked_chunks(chunks: SubjectChunks, lengths: np.ndarray, masked_of) -> SubjectChunks:
    """The chunks with the ranges BLAST scans of each (s_GetNextSubjectChunk): the unmasked
    stretches of its subject (masked_of(local): the masked ranges, int [k, 2]) that reach
    into the chunk, the first and last cut to it; a subject of one chunk keeps them whole.
    A chunk with none is not searched (BLAST skips it)."""
    kept, pieces = [], []
    subject_starts = np.flatnonzero(np.diff(chunks.local_index, prepend=-1))
    for lo, hi in zip(subject_starts, np.append(subject_starts[1:], chunks.length.size)):
        local = int(chunks.local_index[lo])
        masked = np.asarray(masked_of(local), dtype=np.int64).reshape(-1, 2)
        unmasked = (np.append(0, masked[:, 1]), np.append(masked[:, 0], int(lengths[local])))
        if hi - lo == 1:
            kept.append(lo)
            pieces.append(unmasked)
            continue
        carried = 0  # BLAST goes on from the last range that reached into the previous chunk
        for c in range(lo, hi):
            piece, carried = _chunk_ranges(*unmasked, int(chunks.start[c]),
                                           int(chunks.length[c]), carried)
            if piece is not None:
                kept.append(c)
                pieces.append(piece)
    picked = chunks.take(np.asarray(kept, dtype=np.int64))
    counts = [piece[0].size for piece in pieces]
    picked.ranges = ScanRanges(np.concatenate(([0], np.cumsum(counts, dtype=np.int64))),
                               np.concatenate([p[0] for p in pieces] or [np.zeros(0, np.int64)]),
                               np.concatenate([p[1] for p in pieces] or [np.zeros(0, np.int64)]))
    return picked


def _chunk_ranges(open_left, open_right, start: int, length: int, carried: int):
    """(the unmasked ranges reaching into chunk [start, start + length), from the range
    `carried` on, in chunk coordinates, or None; the range the next chunk starts from)."""
    i = carried
    while open_right[i] < start:
        i += 1
    begin = i
    while i < open_left.size and open_left[i] < start + length:
        i += 1
    if i == begin:
        return None, i - 1
    left, right = open_left[begin:i] - start, open_right[begin:i] - start
    left[0] = max(left[0], 0)
    right[-1] = min(right[-1], length)
    return (left, right), i - 1


# ----------------------------------------------------------------------------------------------
# what every volume's search of one batch shares


@dataclass
class BatchPlan:
    """What every volume's preliminary search of one query batch shares."""

    queries: list
    first_index: int
    batch: object          # QueryBatch
    stats: object = None   # SearchStatistics; None when nothing is left to search
    table: object = None   # LookupTable; None when every query is masked or too short
    diag_hash: object = None  # the batch's DiagonalHash, carried across all volumes


def plan_batch(queries: list, first_index: int, db, options: SearchOptions,
               times: StageTimes, pool=INLINE, masks_found: list | None = None) -> BatchPlan:
    """Contexts, masks, statistics and the lookup table of one batch of queries; the masks
    (but those in `masks_found`: query.build_batch) and the table are made on the threads
    of `pool`. It needs no backend: a driver plans the first batch while the GPU is set
    up."""
    from .lookup import build_lookup
    from .query import build_batch
    from .stats import prepare_statistics

    with times.stage("query setup"):
        batch = build_batch(queries, options, pool, masks_found)
        plan = BatchPlan(queries, first_index, batch)
        if len(batch.lookup_segments):
            from .ungapped import DiagonalHash, device_hash_lanes, hash_parts
            # the table is built in compiled code that lets go of the GIL, the statistics
            # mostly in Python: side by side, they take the time of the longer one
            table = beside(build_lookup, batch, options, pool)
            plan.stats = prepare_statistics(batch, db.stats_letters, db.stats_num_seqs,
                                            options)
            plan.table = table.result()
            plan.diag_hash = DiagonalHash(
                hash_parts(options.num_threads), options.window_size,
                device_hash_lanes(options.window_size, plan.table.word_size))
    return plan


def empty_result(index: int, query) -> QueryResult:
    return QueryResult(index, query.id, query.defline, len(query))


# ----------------------------------------------------------------------------------------------
# stage rules the drivers follow


def ungapped_in_database_order(table) -> bool:
    """Whether the ungapped stage must see the chunks in database order: the diagonal hash
    (long queries) reuses its cells in the order of insertion, so a driver that searches
    parts of the database at once lets them through that stage one at a time, in order.
    ungapped.py (and numba with it) is imported at the first call, not with this module: in
    the pipeline's planner, imported first thing, it would hold the first batch's masks and
    table back until the GPU's set-up thread had imported numba."""
    from .ungapped import uses_diag_hash

    return uses_diag_hash(table)


def volume_jobs(db, parts_per_volume: int) -> list:
    """(volume, subject range) pieces of about equal letter counts; a subject is never split
    across jobs, since its chunks are merged in one place."""
    jobs = []
    for volume in db.volumes:
        lengths = np.asarray(volume.lengths, dtype=np.int64)
        if parts_per_volume <= 1 or lengths.size <= 1:
            jobs.append((volume, range(0, int(lengths.size))))
            continue
        ends = np.cumsum(lengths)
        targets = ends[-1] * np.arange(1, parts_per_volume) / parts_per_volume
        cuts = distinct_sorted(np.concatenate([[0], np.searchsorted(ends, targets, side="left") + 1,
                                              [lengths.size]]))
        cuts = cuts[cuts <= lengths.size]
        jobs += [(volume, range(int(a), int(b))) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    return jobs


class SubjectBuffers:
    """Each volume's SubjectBuffer, made once for a whole search, for the engine and a
    driver's preloading thread alike. (dict.setdefault keeps the first one made, whichever
    thread asks.)"""

    def __init__(self, times: StageTimes):
        self.times = times
        self.made: dict = {}  # volume -> SubjectBuffer

    def of(self, volume) -> SubjectBuffer:
        made = self.made.get(volume)
        if made is None:
            with self.times.stage("database load"):
                packed, byte_offset = volume.concat_packed()
            made = self.made.setdefault(volume, SubjectBuffer(packed, byte_offset, volume))
        return made


# ----------------------------------------------------------------------------------------------
# records between the stages


@dataclass
class ExtensionsAhead:
    """The initial hits' score-only gapped extensions, greedy or DP, made by the backend
    ahead of the gapped stage (GpuBackend.greedy_extensions, GpuBackend.dp_extensions):
    int64 [n, GAPPED_AHEAD_FIELDS], a row per initial hit, GAPPED_MADE 0 where the hit
    was left for the CPU."""

    extensions: np.ndarray

    def span(self, lo: int, hi: int) -> "ExtensionsAhead":
        return ExtensionsAhead(self.extensions[lo:hi])


@dataclass
class VolumeHits:
    """The initial hits of a volume's chunks (InitialHits, in chunk order), and their greedy
    gapped extensions when the backend made them ahead."""

    hits: object
    ahead: ExtensionsAhead | None = None

    def of_chunks(self, first: int, end: int) -> "VolumeHits":
        """The hits of chunks [first, end), renumbered from 0."""
        lo, hi = np.searchsorted(self.hits.chunk, [first, end])
        return VolumeHits(self.hits.of_chunks(first, end),
                          None if self.ahead is None else self.ahead.span(lo, hi))


@dataclass
class PrelimHits:
    """Preliminary HSP lists per query, {query index: {ordinal: Hsps}}, the traceback
    searches made ahead for them, {(query index, ordinal): TailsAhead}, and how many initial
    hits the ungapped stage kept (QueryBatchSizes sizes the next batch from them)."""

    by_query: dict = field(default_factory=dict)
    tails: dict = field(default_factory=dict)
    extensions: int = 0

    def add(self, query_index: int, ordinal: int, hsps: Hsps) -> None:
        self.by_query.setdefault(query_index, {})[ordinal] = hsps

    def merge(self, other: "PrelimHits") -> None:
        for q, subjects in other.by_query.items():
            self.by_query.setdefault(q, {}).update(subjects)
        self.tails.update(other.tails)
        self.extensions += other.extensions


# ----------------------------------------------------------------------------------------------
# the engine of one search

class TurnsOnce:
    """A volume's turns at the scan and at the ungapped stage (context managers, or None),
    each taken once: the scan's around the first scan only, the ungapped stage's from the
    first extension until this object's `with` block ends."""

    def __init__(self, scan_turn, ungapped_turn):
        self.scan_turn = scan_turn
        self.ungapped_turn = ungapped_turn
        self.held = ExitStack()

    def first_scan(self):
        turn, self.scan_turn = self.scan_turn, None
        return turn or nullcontext()

    def enter_ungapped(self) -> None:
        if self.ungapped_turn is not None:
            turn, self.ungapped_turn = self.ungapped_turn, None
            self.held.enter_context(turn)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.held.__exit__(*exc)


@dataclass
class ScannedSeeds:
    """A scan's seeds, with their ungapped extensions when the backend made them ahead
    (ungapped.UngappedAhead); or, when the backend made the in-order pass too, no seeds
    but their count and the initial hits (ungapped.InitialHits, unsorted)."""

    seeds: "Seeds"
    ahead: "UngappedAhead | None" = None
    hits: "InitialHits | None" = None
    count: int = 0

    def __len__(self) -> int:
        return self.count if self.hits is not None else len(self.seeds)

    def of_chunks(self, first: int, end: int) -> "ScannedSeeds":
        """The seeds of chunks [first, end), renumbered from 0, with their extensions."""
        if self.hits is not None:
            return ScannedSeeds(self.seeds, hits=self.hits.of_chunks(first, end),
                                count=self.count)
        if self.ahead is None:
            return ScannedSeeds(self.seeds.of_chunks(first, end))
        lo, hi = np.searchsorted(self.seeds.chunk, [first, end])
        return ScannedSeeds(self.seeds.of_chunks(first, end), self.ahead.span(lo, hi))


# A volume's chunks are scanned and extended in slices, in order, each aimed at SLICE_SEEDS
# seeds (20 bytes each), so that the seeds of a whole volume are never held at once (where
# the scan does not stop at a seed budget: see SEED_BUDGET below); the
# first slice has FIRST_SLICE_LETTERS letters, later ones as many as the seeds per letter
# so far give. Each slice costs a scan call (a GPU launch) and a pass of the ungapped
# stage's threads: smaller slices hold less and wait more (docs/perf/blastn-gpu-extensions.md).
SLICE_SEEDS = 1 << 22
FIRST_SLICE_LETTERS = 1 << 22
# Where the in-order pass runs on the device, the seeds never reach the host: a slice is
# bounded by the device's memory for them (about 100 bytes a seed), and larger slices pay
# the launches and round trips of a slice fewer times.
DEVICE_SLICE_SEEDS = 1 << 24


def sliced_initial_hits(chunks: SubjectChunks, scan, extend,
                        slice_seeds: int | None = None, counted=None,
                        made_ahead=None) -> "VolumeHits":
    """The initial hits of `chunks` (VolumeHits), as extend(scan(chunks), chunks) gives
    them, made slice after slice in chunk order (the hits are in chunk order, and the
    diagonal hash, which extend carries from one call to the next, sees the chunks in the
    same order), each aimed at `slice_seeds` seeds (SLICE_SEEDS unless given). The next
    slice is scanned while this one is extended: the scan and the extension run on
    different devices, or on different threads (pools.beside). `counted(hits)`, when
    given, is told their number before the slices' hits are joined. With
    `made_ahead(hits, chunks)` (Engine.extensions_ahead), the hits' gapped extensions are
    made beside the later slices' scans (ExtensionsBeside) and come with them."""
    slice_seeds = SLICE_SEEDS if slice_seeds is None else slice_seeds
    total = len(chunks.length)
    if total == 0:
        found = extend(scan(chunks), chunks)
        return found if made_ahead is None else \
            VolumeHits(found.hits, made_ahead(found.hits, chunks))
    extensions = None if made_ahead is None else ExtensionsBeside(chunks, made_ahead)
    parts = []
    letters_seen, seeds_seen = 0, 0
    first, last = 0, slice_end(chunks.length, 0, FIRST_SLICE_LETTERS)
    part = _slice(chunks, first, last)
    scanning = beside(scan, part)
    while first < total:
        seeds = scanning.result()
        letters_seen += int(np.sum(part.length, dtype=np.int64))
        seeds_seen += len(seeds)
        following = last
        if following < total:
            want = max(1, slice_seeds * letters_seen // max(1, seeds_seen))
            end = slice_end(chunks.length, following, want)
            next_part = _slice(chunks, following, end)
            scanning = beside(scan, next_part)
        parts.append((first, extend(seeds, part)))
        del seeds
        if extensions is not None:
            extensions.add(first, last, parts[-1][1].hits)
        if following < total:
            first, last, part = following, end, next_part
        else:
            first = total
    if counted is not None:
        counted(sum(len(found.hits) for _, found in parts))
    joined = joined_volume_hits(parts)
    return joined if extensions is None else VolumeHits(joined.hits, extensions.joined())


# A call of ExtensionsBeside extends at least this many hits (but the last): each call waits
# for its longest extension and pays its launch (docs/perf/pipeline.md)
BESIDE_HITS = 1 << 17


class ExtensionsBeside:
    """The gapped extensions of a volume's initial hits made slice by slice, beside the
    scans of the slices after them: once the last call has ended, one call for all the
    slices extended since, when they hold BESIDE_HITS hits. Each extension is a function of
    its hit alone, so they are those of one call for every hit."""

    def __init__(self, chunks: SubjectChunks, made_ahead):
        self.chunks, self.made_ahead = chunks, made_ahead
        self.waiting = []   # (first chunk, end chunk, hits numbered from the first)
        self.running = None
        self.made = []      # ExtensionsAhead rows, in chunk order

    def add(self, first: int, end: int, hits) -> None:
        """The hits of chunks [first, end), numbered from `first`: extended in this call if
        none runs, else with the next."""
        self.waiting.append((first, end, hits))
        if self.running is None or self.running.done():
            self._take()
            if sum(len(found) for _, _, found in self.waiting) >= BESIDE_HITS:
                self._start()

    def joined(self) -> "ExtensionsAhead":
        """Every slice's extensions, in chunk order, once made."""
        self._take()
        self._start()
        self._take()
        return ExtensionsAhead(np.concatenate(self.made) if self.made else
                               np.zeros((0, GAPPED_AHEAD_FIELDS), dtype=np.int64))

    def _start(self) -> None:
        if not self.waiting:
            return
        from .ungapped import joined_initial_hits

        start, end = self.waiting[0][0], self.waiting[-1][1]
        hits = joined_initial_hits([(first - start, found) for first, _, found in
                                    self.waiting])
        self.waiting = []
        self.running = beside(self.made_ahead, hits, _slice(self.chunks, start, end))

    def _take(self) -> None:
        if self.running is None:
            return
        made, self.running = self.running.result(), None
        if made is not None:
            self.made.append(made.extensions)


# A scan that stops at a seed budget (BackendPlan.stops_scans: the CPU's) cuts the slices
# itself, inside a chunk where it must: a slice holds at most SEED_BUDGET seeds (20 bytes
# each), the ungapped stage carrying a cut chunk's diagonal state to the next slice. A job
# holds two slices at once (one scanned beside the other's extension;
# docs/perf/blastn-gpu-extensions.md), more where it scans ahead of its turn (below).
SEED_BUDGET = 1 << 17
# A job waiting for its turn at the diagonal hash scans on, up to this many slices, so that
# its turn extends them, its hash's parts side by side on the search's threads (at least
# SPREAD_SEEDS seeds a slice), instead of scanning them (docs/perf/pipeline.md)
SCAN_AHEAD_SLICES = 8
SPREAD_SEEDS = SEED_BUDGET // 4
# ... from this many threads on: with fewer, the job in its turn keeps the cores busy with its
# own scan beside its extensions, and slices scanned ahead would only take memory (kleb's
# -task blastn on 2 threads: 298-305 MB against 241-251, for the same time)
SCAN_AHEAD_THREADS = 4


def stopping_initial_hits(chunks: SubjectChunks, scan_from, extend, ahead: int = 1,
                          wait_turn=None) -> "VolumeHits":
    """The initial hits of `chunks` (VolumeHits), as sliced_initial_hits gives them, made
    slice after slice where the scan stops: scan_from(chunks from a slice's first on, the
    subject position to start from) gives (ScannedSeeds, stop), stop None at the end, else
    the (chunk, position) it stopped at; extend(seeds, chunks, carry, cut) extends the seeds
    of a run of chunks, `cut` when its last chunk goes on in the next call, `carry`
    (ungapped.CutChunk) taking that chunk's state from one call to the next.

    The slices are scanned on a thread of their own (pools.beside), up to `ahead` of them
    waiting for their extension, and each extension takes every slice scanned by then, as
    one run. scan_from's third argument is a buffer of (SEED_FIELDS, SEED_BUDGET) int32 to
    write the slice's seeds into (ScanAhead's: used again once let go). `wait_turn()`,
    when given, waits for this job's turn at the diagonal hash: meanwhile the slices are
    scanned, and the turn extends them in a few calls, each large enough to spread the
    hash's parts over the search's threads."""
    from .ungapped import CutChunk

    total = len(chunks.length)
    carry = CutChunk()
    scanned = ScanAhead(ahead)
    scanning = beside(scanned.fill, lambda first, position, out: scan_from(
        _slice(chunks, first, total), position, out), total)
    parts = []
    try:
        if wait_turn is not None:
            wait_turn()
        while True:
            first, end, cut, seeds = scanned.taken()
            parts.append((first, extend(ScannedSeeds(seeds), _slice(chunks, first, end), carry,
                                        cut)))
            del seeds
            if not cut and end == total:
                break
    finally:
        scanned.close()
    scanning.result()  # re-raises the scan's error
    return joined_volume_hits(parts)


class ScanAhead:
    """The slices a job's scan stops at, scanned ahead of their extensions (at most
    `ahead` waiting): fill() scans them in turn, taken() hands over every one scanned by
    then as one run (waiting for one); an error in the scan ends both. The slices are
    joined as they come, in the scan's thread (SeedRun): joined in the job's turn at the
    diagonal hash, they held every other job's turn back for as long as the copy took.
    Each slice is scanned into a buffer used again once its seeds are let go: a fresh
    buffer a slice faulted its pages in anew, most of a search's page faults
    (docs/perf/whole-search.md). One slice ahead, three are in use at once (the slice being
    scanned, the one waiting, the one being extended) and all three are kept. Further
    ahead (16 threads) none is kept: kept by every job, they raised the search's peak
    memory more than they saved time."""

    def __init__(self, ahead: int):
        self.ahead = max(1, ahead)
        self.buffers = RecycledBuffers((SEED_FIELDS, SEED_BUDGET), np.int32,
                                       3 if self.ahead == 1 else 0)
        self.run = None               # [first chunk, end, cut, Seeds | SeedRun]
        self.waiting = 0              # the slices in it
        self.ended = False            # the scan is through (or failed), or closed
        self.error = None
        self.changed = threading.Condition()

    def fill(self, scan_from, total: int) -> None:
        """scan_from(first chunk, position, buffer) -> (ScannedSeeds, stop), slice after
        slice of `total` chunks."""
        first, position = 0, 0
        try:
            while True:
                with self.changed:
                    while self.waiting >= self.ahead and not self.ended:
                        self.changed.wait()
                    if self.ended:
                        return
                found, stop = scan_from(first, position, self.buffers.free())
                if stop is None:
                    end, cut, following = total, False, None
                else:
                    following, position = first + stop[0], stop[1]
                    end, cut = following + int(position > 0), position > 0
                with self.changed:
                    self._add(first, end, cut, found.seeds)
                    self.changed.notify_all()
                del found  # joined into the run: not held through the next slice's scan
                if following is None:
                    return
                first = following
        except BaseException as exc:  # noqa: BLE001 - handed to the extensions' thread
            with self.changed:
                self.error = exc
                self.changed.notify_all()
            raise
        finally:
            with self.changed:
                self.ended = True
                self.changed.notify_all()

    def _add(self, first: int, end: int, cut: bool, seeds: "Seeds") -> None:
        """A slice onto the run waiting (a slice alone is kept as it is)."""
        self.waiting += 1
        if self.run is None:
            self.run = [first, end, cut, seeds]
            return
        run = self.run[3]
        if not isinstance(run, SeedRun):
            run = SeedRun(run, self.ahead)
        run.add(seeds, first - self.run[0])
        self.run[1:] = [end, cut, run]

    def taken(self) -> tuple:
        """(first chunk, end, cut, Seeds) of every slice scanned by then, the seeds' chunks
        numbered from the first."""
        with self.changed:
            while self.run is None and self.error is None:
                if self.ended:
                    raise RuntimeError("the scan ended before its last slice")
                self.changed.wait()
            if self.error is not None:
                raise self.error
            first, end, cut, seeds = self.run
            self.run, self.waiting = None, 0
            self.changed.notify_all()
        return first, end, cut, seeds.seeds() if isinstance(seeds, SeedRun) else seeds

    def close(self) -> None:
        with self.changed:
            self.ended = True
            self.changed.notify_all()


class SeedRun:
    """Successive slices' seeds in one buffer of SEED_FIELDS rows, each slice's chunks
    renumbered from the run's first chunk. The buffer is made for `slices` slices at once
    in pages of its own (arrays.fresh_pages: only those written are resident, and they go
    back to the system with the run): buffers grown by doubling, each freed as the next
    was made, left the memory allocator holding some 40 MB more at 16 threads
    (docs/perf/whole-search.md)."""

    def __init__(self, seeds: "Seeds", slices: int):
        columns = slices * max(1, len(seeds), SEED_BUDGET)
        self.rows = fresh_pages(SEED_FIELDS * columns, np.int32).reshape(SEED_FIELDS, columns)
        self.size = 0
        self.add(seeds, 0)

    def add(self, seeds: "Seeds", chunk_shift: int) -> None:
        n = len(seeds)
        if self.size + n > self.rows.shape[1]:
            rows = np.empty((SEED_FIELDS, max(self.size + n, 2 * self.rows.shape[1])),
                            dtype=np.int32)
            rows[:, :self.size] = self.rows[:, :self.size]
            self.rows = rows
        at = slice(self.size, self.size + n)
        np.add(seeds.chunk, np.int32(chunk_shift), out=self.rows[SEED_CHUNK, at])
        for row, name in ((SEED_Q_OFF, "q_off"), (SEED_S_OFF, "s_off"),
                          (SEED_S_FIRST, "s_first"), (SEED_HIT_S, "hit_s")):
            self.rows[row, at] = getattr(seeds, name)
        self.size += n

    def seeds(self) -> "Seeds":
        from .scan import Seeds

        return Seeds(*(self.rows[row, :self.size] for row in range(SEED_FIELDS)))


def _slice(chunks: SubjectChunks, first: int, last: int) -> SubjectChunks:
    return chunks if (first, last) == (0, len(chunks.length)) else \
        chunks.take(np.arange(first, last))


def slice_end(lengths: np.ndarray, first: int, letters: int) -> int:
    """The end of the slice of chunks from `first` that holds about `letters` letters (at
    least one chunk)."""
    ends = np.cumsum(lengths[first:], dtype=np.int64)
    return min(int(lengths.size), first + int(np.searchsorted(ends, letters, side="left")) + 1)


def joined_volume_hits(parts: list) -> "VolumeHits":
    """The VolumeHits of successive slices of a volume's chunks as one: `parts` holds (first
    chunk of the slice, its VolumeHits numbered from 0), in chunk order."""
    from .ungapped import joined_initial_hits

    if len(parts) == 1 and parts[0][0] == 0:
        return parts[0][1]
    return VolumeHits(joined_initial_hits([(first, found.hits) for first, found in parts]))




@dataclass(frozen=True)
class Engine:
    """One search's stages over (query batch x volume) pieces: the database, the options,
    the resolved backend, where the time goes, each volume's SubjectBuffer, and
    `letter_scratch(length)`, the calling thread's buffer of subject letters for traceback
    (a driver's pools.PerThreadBuffer: a subject-long array for each traceback would map
    and unmap memory, which serialises the threads on the process's memory map)."""

    db: object
    options: SearchOptions
    backend_plan: BackendPlan
    times: StageTimes
    buffers: SubjectBuffers
    letter_scratch: Callable[[int], np.ndarray]

    # -- preliminary search --------------------------------------------------------------

    def prelim_search(self, plan: BatchPlan, volume, pool=INLINE, ungapped_done=None,
                      **part) -> PrelimHits:
        """Scan one volume (or the part of it that `part` names, as initial_hits takes it),
        extend the seeds, and file the subjects' preliminary HSPs per query, with the
        traceback searches made ahead for them. The chunks' gapped extensions run on
        `pool`. `ungapped_done(extensions)`, when given, is told the ungapped stage's kept
        extensions before the gapped stage starts, the GPU's extensions made ahead included
        (the next batch's size needs no more, so its scan overlaps this batch's gapped
        stage)."""
        gapped = self.initial_hits(plan, volume, pool, ungapped_done=ungapped_done, **part)
        prelim = PrelimHits(extensions=gapped.extensions())
        gapped.file_subjects(gapped.subject_hits(gapped.extend_later(pool)(), pool)(), prelim)
        prelim.tails = self.tails_ahead(prelim.by_query, plan)
        return prelim

    def initial_hits(self, plan: BatchPlan, volume, pool=INLINE, threads: int | None = None,
                     subjects: range | None = None, once_per_volume=None, ungapped_turn=None,
                     scan_turn=None, ungapped_done=None,
                     ungapped_threads: int | None = None) -> "VolumeGapped":
        """prelim_search's scan and ungapped stages (in the calling thread), slice after
        slice (sliced_initial_hits; stopping_initial_hits where the scan stops at a seed
        budget); its gapped stage is returned, ready to run on `pool`.
        `threads`: those the scan and the diagonal hash may spread over (options.num_threads
        unless given); `ungapped_threads`, when given (at least SCAN_AHEAD_THREADS), those
        the diagonal hash's parts may spread over in this job's turn at it (the job's scan
        then goes on, up to SCAN_AHEAD_SLICES slices, while it waits for the turn).

        A driver that searches parts of a volume at once (`subjects`) gives
        `once_per_volume(volume, what, make)`, which makes `what` once for the volume
        whatever the jobs that ask: the whole volume is scanned once (a GPU call has a fixed
        cost, and the jobs would queue for the device one after the other); with the
        diagonal hash, the whole volume's seeds are extended once too, and each job takes
        its chunks' initial hits (the hash must see the database in order, and jobs taking
        turns at it would each wait for the previous one and for the GIL, where one turn per
        volume does not). `ungapped_turn` and `scan_turn` are context managers that wait
        for this job's turn at those stages (ungapped_in_database_order), each taken once
        per volume: the scan's at the first slice's scan, the ungapped stage's from the
        first slice's extension to the last's (TurnsOnce). `ungapped_done(extensions)` is
        told the initial hits' count before their extensions are made ahead."""
        from .gapped import hit_contexts
        from .scan import Seeds
        from .scan.masked import find_masked_seeds
        from .ungapped import PARALLEL_SEEDS, diagonal_pass, extend_seeds, \
            sort_initial_hits, ungapped_rules

        subject_buffer = self.buffers.of(volume)
        buffer = subject_buffer.packed
        every_chunk = searched_chunks(self.db, volume, subject_buffer.byte_offset)
        chunks, first_chunk = every_chunk, 0
        if subjects is not None:
            picked = np.flatnonzero((every_chunk.local_index >= subjects.start) &
                                    (every_chunk.local_index < subjects.stop))
            chunks, first_chunk = every_chunk.take(picked), int(picked[0]) if picked.size else 0
        threads = self.options.num_threads if threads is None else threads
        options, stats, table = self.options, plan.stats, plan.table
        backend = self.backend_plan.backend
        turns = TurnsOnce(scan_turn, ungapped_turn)
        spread = on_threads(threads)
        in_turn_spread = ungapped_threads is not None and ungapped_turn is not None and \
            ungapped_threads >= SCAN_AHEAD_THREADS
        hash_threads = ungapped_threads if in_turn_spread else threads
        hash_spread = on_threads(hash_threads) if in_turn_spread else spread

        rules = ungapped_rules(stats.ungapped_xdrop, stats.reduced_cutoff, options.reward,
                               options.penalty) if self.backend_plan.ungapped_ahead else None
        # the device's in-order pass: not through a masked database's ranges, which the CPU
        # scans (a batch's ranges are the same in every volume)
        walk = diagonal_pass(table, stats.ungapped_cutoff, options.window_size,
                             plan.diag_hash) \
            if self.backend_plan.diagonals_on_device and every_chunk.ranges is None else None

        def scan(part) -> ScannedSeeds:
            if walk is not None:
                # the pass keeps the diagonal hash: it takes the ungapped stage's turn
                turns.enter_ungapped()
            with turns.first_scan(), self.times.stage("scan"):
                if part.ranges is not None:
                    return ScannedSeeds(find_masked_seeds(table, buffer, part.byte_offset,
                                                          part.ranges, threads, spread))
                if walk is not None:
                    hits, count = backend.initial_hits(table, subject_buffer, part.byte_offset,
                                                       part.length, rules, walk)
                    return ScannedSeeds(Seeds.empty(), hits=hits, count=count)
                if rules is not None:
                    return ScannedSeeds(*backend.extended_seeds(
                        table, subject_buffer, part.byte_offset, part.length, rules))
                return ScannedSeeds(backend.find_seeds(table, subject_buffer, part.byte_offset,
                                                       part.length, threads, spread))

        def scan_from(part, position: int, out: np.ndarray) -> tuple:
            with turns.first_scan(), self.times.stage("scan"):
                seeds, stop = backend.find_seeds_from(table, subject_buffer, part.byte_offset,
                                                      part.length, position, SEED_BUDGET, out)
                return ScannedSeeds(seeds), stop

        def extend(scanned: ScannedSeeds, part, carry=None, cut: bool = False) -> VolumeHits:
            turns.enter_ungapped()
            with self.times.stage("ungapped"):
                if scanned.hits is not None:
                    hits = scanned.hits  # in sort_initial_hits' order (Backend.initial_hits)
                else:
                    hits = extend_seeds(scanned.seeds, table, buffer, part.byte_offset,
                                        part.length, stats.ungapped_xdrop,
                                        stats.ungapped_cutoff, stats.reduced_cutoff,
                                        options.reward, options.penalty, hash_threads,
                                        plan.diag_hash, hash_spread, options.window_size,
                                        scanned.ahead, carry, cut,
                                        SPREAD_SEEDS if in_turn_spread else PARALLEL_SEEDS,
                                        by_score=not in_turn_spread)
            return VolumeHits(hits)

        # the scan stops at a seed budget where it can (not through a masked database's
        # ranges)
        stops = self.backend_plan.stops_scans and every_chunk.ranges is None and \
            rules is None

        # the device's slices have their greedy extensions made beside the later slices'
        # scans; DP ones there slowed the scans' walk and themselves (docs/perf/pipeline.md)
        beside_scans = None
        if walk is not None and self.backend_plan.greedy_ahead and not options.ungapped:
            def beside_scans(hits, part) -> ExtensionsAhead | None:
                return self.extensions_ahead(hits, part, subject_buffer, plan)

        told = False  # ungapped_done told already, before the slices' hits were joined

        def tell(count: int) -> None:
            nonlocal told
            told = True
            ungapped_done(count)

        def initial_hits(part, counted=None) -> VolumeHits:
            stopping = stops and len(part.length)
            if stopping and in_turn_spread:
                with turns:
                    found = stopping_initial_hits(part, scan_from, extend, SCAN_AHEAD_SLICES,
                                                  turns.enter_ungapped)
                # the hits in seed order and each chunk's by score, put so once the turn,
                # which every other job of the batch waits for, is passed on
                with self.times.stage("ungapped"):
                    return VolumeHits(sort_initial_hits(found.hits), found.ahead)
            with turns:
                if stopping:
                    return stopping_initial_hits(part, scan_from, extend)
                return sliced_initial_hits(part, scan, extend,
                                           None if walk is None else DEVICE_SLICE_SEEDS,
                                           counted, beside_scans)

        def made_ahead(found: VolumeHits, part) -> VolumeHits:
            if found.ahead is not None:
                return found
            return VolumeHits(found.hits, self.extensions_ahead(found.hits, part,
                                                                subject_buffer, plan))

        last_chunk = first_chunk + len(chunks.length)
        # the count is told as soon as it is known, before the slices' hits are joined, where
        # this job's hits are all those found (the next batch is planned from it)
        counted = None if ungapped_done is None else tell
        # the whole volume's hits, made once for its jobs (their extensions ahead too)
        volume_once = once_per_volume is not None and ungapped_in_database_order(table)
        if once_per_volume is None:
            found = initial_hits(chunks, counted)
        elif volume_once:
            every = len(chunks.length) == len(every_chunk.length)  # then the volume's only job
            whole = once_per_volume(volume, "initial hits", lambda: initial_hits(
                every_chunk, counted if every else None))
            found = whole.of_chunks(first_chunk, last_chunk)
        else:
            seeds = once_per_volume(volume, "seeds", lambda: scan(every_chunk))
            with turns:
                found = extend(seeds.of_chunks(first_chunk, last_chunk), chunks)
        if ungapped_done is not None and not told:
            ungapped_done(len(found.hits))
        if volume_once:
            found = once_per_volume(volume, "made ahead", lambda: made_ahead(
                whole, every_chunk)).of_chunks(first_chunk, last_chunk)
        else:
            found = made_ahead(found, chunks)
        hits = found.hits
        bounds = np.searchsorted(hits.chunk, np.arange(len(chunks.length) + 1,
                                                       dtype=hits.chunk.dtype))
        cuts = pieces_per_chunk(found.ahead, bounds, options.greedy, pool.threads)
        contexts = hit_contexts(hits.q_start, plan.batch) \
            if pool.threads > 1 or cuts.max(initial=0) > 1 else None
        pieces = [(int(c), part) for c in np.flatnonzero(np.diff(bounds))
                  for part in context_pieces(contexts, bounds[c], bounds[c + 1], cuts[c])]
        return VolumeGapped(plan.batch, stats, options, volume, buffer, chunks, hits,
                            found.ahead, bounds, contexts, pieces, pool.spread, self.times)

    def extensions_ahead(self, hits, chunks: "SubjectChunks", subjects: SubjectBuffer,
                         plan: BatchPlan) -> ExtensionsAhead | None:
        """The initial hits' score-only gapped extensions, made on the GPU before the gapped
        stage needs them, when the backend makes them: greedy ones (greedy.cu: linear gap
        costs only) or X-drop DP ones (dynprog.cu); None otherwise. Each is a function of
        its hit alone, so the GPU extends every hit at once, and the gapped stage's in-order
        pass only picks those it keeps instead of extending them one after the other
        (docs/perf/gpu-greedy.md, docs/perf/blastn-gpu-extensions.md)."""
        from .gapped import hit_contexts

        if not len(hits) or self.options.ungapped:
            return None
        backend, options, batch = self.backend_plan.backend, self.options, plan.batch
        if self.backend_plan.greedy_ahead:
            with self.times.stage("gapped"):
                return ExtensionsAhead(backend.greedy_extensions(
                    subjects, chunks.byte_offset, chunks.length, hits.chunk, hits.q_start,
                    hits.s_start, hits.length, hit_contexts(hits.q_start, batch), batch,
                    int(plan.stats.gap_xdrop), int(options.reward), int(options.penalty)))
        if not self.backend_plan.dp_ahead:
            return None
        from .alphabet import score_matrix

        with self.times.stage("gapped"):
            return ExtensionsAhead(backend.dp_extensions(
                subjects, chunks.byte_offset, chunks.length, hits,
                hit_contexts(hits.q_start, batch), batch,
                score_matrix(options.reward, options.penalty), int(options.gapopen),
                int(options.gapextend), int(plan.stats.gap_xdrop)))

    def tails_ahead(self, by_query: dict, plan: BatchPlan) -> dict:
        """The traceback's alignments of preliminary HSPs ({query: {ordinal: Hsps}}), made on
        the GPU before their tracebacks start, when the backend makes them (subjects
        resident on the GPU, windows of bases only): {(query, ordinal): TailsAhead}.
        Greedy ones (greedy.cu: linear gap costs): with an alignment's edit runs, the CPU
        only joins and tidies them; without (a search too long to keep its rows), it
        searches again, knowing the best distances, and stops there: most of a search's
        time goes past the alignment's end, confirming that nothing better follows. X-drop
        DP ones (dp_traceback.cu): whole alignments, which the CPU takes where its start
        point is the device's; each may read every letter within the traceback's reach
        (dp_reach) when those are all bases: a final alignment often runs far past its
        preliminary HSP. Only for a batch whose DP tracebacks would keep the CPU's threads
        busy for a while (TAILS_MIN_CELLS_PER_THREAD): a smaller batch's are done beside the
        next batch's scans, and a launch would only hold them up."""
        from .alphabet import score_matrix
        from .hsp import rows_by_score
        from .layouts import HSP_S_END, HSP_S_START
        from .traceback import FETCH_MARGIN, TailsAhead, dp_reach, dp_tails_ahead, trace_cells

        keyed = [((q, ordinal), hsps) for q, subjects in by_query.items()
                 for ordinal, hsps in subjects.items() if hsps.score.size]
        if not (self.backend_plan.tails_ahead and keyed) or self.options.ungapped:
            return {}
        db, backend, options = self.db, self.backend_plan.backend, self.options
        with self.times.stage("traceback"):
            lists = [hsps for _, hsps in keyed]
            rows = rows_by_score(lists)
            counts = np.array([hsps.score.size for hsps in lists], dtype=np.int64)
            ordinal = np.repeat(np.array([o for (_, o), _ in keyed], dtype=np.int64), counts)
            length = db.lengths[ordinal]
            exact = np.stack([np.maximum(rows[:, HSP_S_START] - FETCH_MARGIN, 0),
                              np.minimum(rows[:, HSP_S_END] + FETCH_MARGIN, length)], axis=1)
            reach = None if options.greedy else \
                dp_reach(rows, length, plan.batch.context_length)
            address = np.zeros(rows.shape[0], dtype=np.uint64)
            usable = np.zeros(rows.shape[0], dtype=bool)
            for volume in db.volumes:
                mine = (ordinal >= volume.first_ordinal) & \
                    (ordinal < volume.first_ordinal + volume.num_seqs)
                if not mine.any():
                    continue
                subjects = self.buffers.of(volume)
                base = backend.resident_address(subjects)
                if base is None:
                    continue
                local = ordinal[mine] - volume.first_ordinal
                address[mine] = np.uint64(base) + subjects.byte_offset[local].astype(np.uint64)
                usable[mine] = volume.bases_only(local, exact[mine, 0], exact[mine, 1])
                if reach is not None:
                    whole = volume.bases_only(local, reach[mine, 0], reach[mine, 1])
                    exact[mine] = np.where(whole[:, None], reach[mine], exact[mine])
                    usable[mine] |= whole
            exact[~usable] = 0  # a window of no letters: the GPU leaves the search to the CPU
            ends = np.cumsum(counts).tolist()
            xdrop = int(plan.stats.gap_xdrop_final)
            if not options.greedy:
                if trace_cells(rows, xdrop, int(options.gapextend)).sum() < \
                        TAILS_MIN_CELLS_PER_THREAD * options.num_threads:
                    return {}
                ahead, runs = backend.dp_tails(
                    rows, address, length, exact, plan.batch,
                    score_matrix(options.reward, options.penalty), int(options.gapopen),
                    int(options.gapextend), xdrop)
                return dict(zip((key for key, _ in keyed), dp_tails_ahead(rows, ahead, runs, ends)))
            ahead, runs = backend.greedy_tails(rows, address, length, exact, plan.batch, xdrop,
                                               int(options.reward), int(options.penalty))
            return {key: TailsAhead(rows[first:last], ahead[first:last], runs[first:last])
                    for (key, _), first, last in zip(keyed, [0] + ends[:-1], ends)}

    # -- traceback -----------------------------------------------------------------------

    def trace_tasks(self, prelim: PrelimHits, plan: BatchPlan) -> list:
        """The batch's TraceTasks (trace_tasks), each with its searches made ahead."""
        return trace_tasks(prelim, self.options,
                           [query.searched_length for query in plan.queries])

    def trace_groups(self, tasks: list, groups: int) -> list:
        return trace_groups(tasks, self.db, groups)

    def trace_group(self, group: "TraceGroup", plan: BatchPlan) -> list:
        """Traceback of a TraceGroup, then BLAST's final filtering and order of each task's
        HSPs (with the alignment counts the output needs). Returns (ordinal, final HSPs) for
        each task, in order.

        As BLAST's partial fetching, only the subject's letters around the HSPs are
        unpacked; when an alignment reads beyond them (BLAST's fence hit), the traceback is
        redone on every letter it may read."""
        from .output.tabular import COUNT_IDENTITIES
        from .traceback import traceback_group
        from .ungapped_final import ungapped_group

        tasks, volume = group.tasks, group.volume
        ordinals = np.array([task.ordinal for task in tasks], dtype=np.int64)
        scratch = self.letter_scratch(int(self.db.lengths[ordinals].max()))
        hard_masked = getattr(self.db, "hard_mask", False)
        subjects = self.db.traced_subjects(volume) if hard_masked else volume.packed_subjects()
        locals_ = ordinals - volume.first_ordinal
        with self.times.stage("traceback"):
            if self.options.ungapped:
                final = ungapped_group([task.hsps for task in tasks], locals_,
                                       [task.query_index for task in tasks], subjects,
                                       plan.batch, plan.stats, self.options, scratch)
            else:
                final, _ = traceback_group([task.hsps for task in tasks], locals_,
                                           [task.query_index for task in tasks],
                                           subjects, plan.batch, plan.stats,
                                           self.options, scratch,
                                           [task.tails for task in tasks])
        if hard_masked:
            # counted on masked letters: the reports that read the true letters count again
            for hsps in final:
                hsps.masked_identities = hsps.counts[:, COUNT_IDENTITIES]
        return [(task.ordinal, hsps) for task, hsps in zip(tasks, final)]

    def query_results(self, plan: BatchPlan, traced: list) -> list:
        """The batch's query results from each query's traced (ordinal, HSPs) pairs."""
        return query_results([(plan.first_index + q, query, pairs) for q, (query, pairs)
                              in enumerate(zip(plan.queries, traced))], self.options)


@dataclass
class VolumeGapped:
    """A volume's gapped stage: its pieces (chunk, hit indices or None for all), extended
    on any thread (extend_later), then filed in chunk order."""

    batch: object
    stats: object
    options: SearchOptions
    volume: object
    buffer: np.ndarray
    chunks: "SubjectChunks"
    hits: object           # InitialHits
    ahead: "ExtensionsAhead | None"
    bounds: np.ndarray
    contexts: np.ndarray | None
    pieces: list
    spread: object
    times: StageTimes

    def of_subjects(self, kept: np.ndarray) -> "VolumeGapped":
        """This gapped stage for the subjects whose local index `kept` (bool, per subject of
        the volume) marks: a part of the database whose scan and ungapped stage ran over
        more subjects than it holds, for the diagonal hash's sake (shards.py)."""
        return replace(self, pieces=[(c, part) for c, part in self.pieces
                                     if kept[self.chunks.local_index[c]]])

    def extensions(self) -> int:
        """The initial hits of this stage's chunks: BLAST's ungapped extensions kept
        (good_init_extends), counted chunk by chunk as BLAST counts them."""
        chunks = distinct_sorted(np.array([c for c, _ in self.pieces], dtype=np.int64))
        return int((self.bounds[chunks + 1] - self.bounds[chunks]).sum())

    def piece_hits(self) -> list:
        """The number of initial hits of each piece, the measure of its work: the pieces
        with most hits are those that take longest."""
        return [int(self.bounds[c + 1] - self.bounds[c]) if part is None else len(part)
                for c, part in self.pieces]

    def extend_later(self, pool):
        """Every piece extended on `pool`, the heaviest tasks first; returns a function that
        waits for them and gives each piece's (rows, origin), in piece order. With the
        extensions made ahead, whole chunks go in runs, each one task and one compiled call
        (gapped.extend_chunks_given, extend_chunks_dp_given): a call per chunk would hold
        the GIL longer, in Python, than the compiled work it calls for."""
        hits = self.piece_hits()
        tasks = self._tasks(hits, pool.threads)
        if any(len(task) > 1 for task in tasks):
            self._run_arguments  # made once, here, rather than by the first tasks at once
        later = pool.map_later(self._extend_task, tasks, [sum(hits[i] for i in task)
                                                          for task in tasks])

        def results() -> list:
            by_piece = [None] * len(self.pieces)
            for task, found in zip(tasks, later()):
                for i, result in zip(task, found):
                    by_piece[i] = result
            return by_piece

        return results

    def _tasks(self, hits: list, threads: int) -> list:
        """The pieces' indices in tasks: a piece cut from a chunk alone; whole chunks, when
        their extensions were made ahead, in runs of about RUN_TASKS_PER_THREAD tasks per
        thread's share of the hits."""
        if self.ahead is None:
            return [[i] for i in range(len(self.pieces))]
        whole = [i for i, (_, part) in enumerate(self.pieces) if part is None]
        alone = [[i] for i, (_, part) in enumerate(self.pieces) if part is not None]
        target = max(1, sum(hits) // (RUN_TASKS_PER_THREAD * threads))
        return alone + runs_of(whole, [hits[i] for i in whole], target)

    def _extend_task(self, task: list) -> list:
        if len(task) == 1:
            return [self.extend_piece(self.pieces[task[0]])]
        from .gapped import extend_chunks_dp_given, extend_chunks_given

        chunks = np.array([self.pieces[i][0] for i in task], dtype=np.int64)
        extend_chunks = extend_chunks_given if self.options.greedy else extend_chunks_dp_given
        with self.times.stage("gapped"):
            rows, origin, counts = extend_chunks(chunks, self.bounds, *self._run_arguments)
        ends = np.cumsum(counts)
        return [(rows[end - n:end], origin[end - n:end]) for n, end in zip(counts, ends)]

    @cached_property
    def _run_arguments(self) -> tuple:
        """extend_chunks_given's (extend_chunks_dp_given's) arguments after the chunks and
        their bounds: the volume's hits, as extend_hits converts a piece's."""
        hits, batch, stats, options = self.hits, self.batch, self.stats, self.options
        contexts = self.contexts
        if contexts is None:
            from .gapped import hit_contexts
            contexts = hit_contexts(hits.q_start, batch)

        def as64(values):
            return np.ascontiguousarray(values, dtype=np.int64)

        sequence = np.ascontiguousarray(batch.sequence, dtype=np.uint8)
        chunks = (self.buffer, as64(self.chunks.byte_offset), as64(self.chunks.length),
                  as64(stats.gapped_cutoff), int(stats.gap_xdrop))
        costs = (int(options.gapopen), int(options.gapextend), int(options.min_diag_separation))
        found = (as64(self.ahead.extensions), as64(hits.q_start), as64(hits.s_start),
                 as64(hits.length), as64(hits.score))
        if not options.greedy:
            from .alphabet import score_matrix

            return (*found, as64(hits.seed_q), as64(hits.seed_s), as64(contexts),
                    as64(batch.context_offset), as64(batch.context_length), sequence, *chunks,
                    as64(score_matrix(options.reward, options.penalty)), *costs)
        return (*found, as64(contexts), as64(batch.context_offset), as64(batch.context_length),
                sequence, batch.query_words, *chunks, int(options.reward), int(options.penalty),
                *costs)

    def extend_piece(self, piece) -> tuple:
        """The gapped rows of one piece, and the indices of the hits they came from; in an
        ungapped search, the hits themselves."""
        from .gapped import extend_hits
        from .ungapped import ungapped_hsp_rows

        c, part = piece
        hits, chunks, bounds = self.hits, self.chunks, self.bounds
        picked = slice(bounds[c], bounds[c + 1]) if part is None else part + bounds[c]
        if self.options.ungapped:
            rows = ungapped_hsp_rows(hits.q_start[picked], hits.s_start[picked],
                                     hits.length[picked], hits.score[picked],
                                     hits.seed_q[picked], hits.seed_s[picked], self.batch)
            origin = np.arange(len(rows))
            return rows, origin if part is None else part[origin]
        first = chunks.byte_offset[c]
        packed = self.buffer[first:first + (int(chunks.length[c]) + 3) // 4]
        with self.times.stage("gapped"):
            rows, origin = extend_hits(
                hits.q_start[picked], hits.s_start[picked], hits.length[picked],
                hits.score[picked], self.batch, packed, int(chunks.length[c]), self.stats,
                self.options, hits.seed_q[picked], hits.seed_s[picked],
                None if self.contexts is None else self.contexts[picked], self.spread,
                None if self.ahead is None else self.ahead.extensions[picked])
        # the compiled extension's rows are a view of a row per hit, few of them kept: a
        # copy lets the rest go while the volume's other pieces wait for their subjects
        rows, origin = rows.copy(), origin.copy()
        return rows, origin if part is None else part[origin]

    @cached_property
    def best_hit_lengths(self) -> np.ndarray:
        """subject_rows' context lengths for -subject_besthit, which blastn's engine applies
        to each subject's preliminary HSPs too (none without it)."""
        if not self.options.subject_besthit:
            return np.zeros(0, dtype=np.int64)
        return np.ascontiguousarray(self.batch.context_length, dtype=np.int64)

    def subject_hits(self, results: list, pool):
        """Each subject's HSPs from the pieces' results, per query, worked out on `pool`
        (one task per subject: its chunks merged in order, E-values, the threshold). Returns
        a function that waits for them and gives [(ordinal, [(query index, Hsps)])] in
        subject order."""
        by_subject: dict = {}
        for c, found in _chunk_results(self.pieces, results):
            if found.shape[0]:
                by_subject.setdefault(int(self.chunks.local_index[c]), []).append((c, found))
        # ahead of the later volumes' pieces still queued: this volume's traceback searches
        # wait for them, and may then run on the GPU beside those pieces
        items = list(by_subject.items())
        return pool.map_later(self._subject_hits, items, [AHEAD_OF_PIECES] * len(items))

    def _subject_hits(self, item) -> tuple:
        from .hsp import hsps_from_rows, subject_rows

        subject, found_by_chunk = item
        with self.times.stage("gapped"):
            # chunks in order, so the subject's chunks are merged in order
            parts = [found for _, found in found_by_chunk]
            bounds = np.cumsum([0] + [part.shape[0] for part in parts])
            starts = self.chunks.start[[c for c, _ in found_by_chunk]]
            rows = subject_rows(np.concatenate(parts), bounds, starts, DBSEQ_CHUNK_OVERLAP,
                                OVERLAP_DIAG_CLOSE, self.best_hit_lengths,
                                not self.options.ungapped)
        ordinal = self.volume.first_ordinal + subject
        return ordinal, subject_hsps_by_query(hsps_from_rows(rows), self.stats, self.options)

    @staticmethod
    def file_subjects(subject_hits: list, prelim: PrelimHits) -> None:
        """File subject_hits' result under the queries, in subject order."""
        for ordinal, by_query in subject_hits:
            for query_index, hsps in by_query:
                prelim.add(query_index, ordinal, hsps)


MIN_PIECE_HITS = 256  # a chunk with more initial hits is extended in pieces, by context
# a piece's compiled extension holds workspace for each of its hits (its containment tree's
# and its rows', about 300 bytes), so a chunk with more hits is cut into more pieces than
# threads, where the hits' extensions are not made ahead
PIECE_HITS = 1 << 14
RUN_TASKS_PER_THREAD = 4  # runs of whole chunks per thread's share of a volume's hits
AHEAD_OF_PIECES = 1 << 62  # a task weight above any piece's (its hits)


def pieces_per_chunk(ahead: ExtensionsAhead | None, bounds: np.ndarray, greedy: bool,
                     threads: int) -> np.ndarray:
    """Into how many pieces (at most) the gapped stage cuts each chunk's hits: one a thread;
    more where the CPU makes the extensions, whose compiled pass holds workspace for each
    hit of its piece (PIECE_HITS a piece at most); one where the DP extensions were all made
    ahead, which the in-order pass only looks up (a chunk's pieces cost more Python, under
    the GIL, than its pass)."""
    counts = np.diff(bounds)
    if ahead is None:
        return np.maximum(threads, -(-counts // PIECE_HITS))
    cuts = np.full(counts.size, threads, dtype=np.int64)
    if not greedy:
        undone = np.cumsum(np.concatenate([[0], ahead.extensions[:, GAPPED_MADE] == 0]))
        cuts[undone[bounds[1:]] == undone[bounds[:-1]]] = 1
    return cuts


def context_pieces(contexts, lo: int, hi: int, parts: int) -> list:
    """The initial hits [lo, hi) of one chunk in up to `parts` pieces for the gapped stage:
    index arrays (relative to lo, increasing), each holding whole contexts, with about equal
    hit counts; [None] (all in one) for a small chunk. A hit is only tested against the
    gapped HSPs of its own context, so the pieces give the rows one pass would: a chunk
    with repeats hit by many queries no longer holds up its job."""
    parts = min(parts, (hi - lo) // MIN_PIECE_HITS)
    if contexts is None or parts <= 1:
        return [None]
    of_hit = contexts[lo:hi]
    names, rank, counts = np.unique(of_hit, return_inverse=True, return_counts=True)
    if names.size == 1:
        return [None]
    # the most hit contexts first, each to the lightest piece so far (the first of those
    # tied): a heap of (load, piece), since a chunk of a genome may be hit by the contexts
    # of tens of thousands of reads
    piece_of = [0] * names.size
    load = [(0, piece) for piece in range(min(parts, names.size))]
    hits_of = counts.tolist()
    for k in np.argsort(-counts, kind="stable").tolist():
        lightest, piece = heapq.heappop(load)
        piece_of[k] = piece
        heapq.heappush(load, (lightest + hits_of[k], piece))
    of_hit_piece = np.array(piece_of, dtype=np.int64)[rank]
    return [np.flatnonzero(of_hit_piece == p) for p in range(len(load))]


def _chunk_results(pieces: list, results: list):
    """(chunk, rows) per chunk, in chunk order, from the pieces' (rows, origin) results: the
    rows of a chunk's pieces put back in the order of the hits they came from."""
    k = 0
    while k < len(pieces):
        c = pieces[k][0]
        end = k
        while end < len(pieces) and pieces[end][0] == c:
            end += 1
        if end - k == 1:
            yield c, results[k][0]
        else:
            rows = np.concatenate([results[i][0] for i in range(k, end)])
            origin = np.concatenate([results[i][1] for i in range(k, end)])
            yield c, rows[np.argsort(origin, kind="stable")]
        k = end


def subject_hsps_by_query(hsps: Hsps, stats, options) -> list:
    """E-values for a subject's preliminary HSPs, drop those above the threshold, and split
    the rest by query (Blast_HSPResultsInsertHSPList): [(query index, Hsps)]."""
    from .stats import bit_scores, evalues

    hsps = hsps.take(score_order(hsps))
    hsps.evalue = evalues(hsps.score, hsps.context, stats)
    hsps.bitscore = bit_scores(hsps.score, hsps.context, stats)
    kept = np.flatnonzero(hsps.evalue <= options.evalue)
    # each query's HSPs in their score order: a stable sort by query, then a view each (a
    # mask per query would go over a subject's HSPs once for every query, and a copy per
    # query would hold the GIL once for every (query, subject) pair)
    hsps = hsps.take(kept[np.argsort(hsps.context[kept] // 2, kind="stable")])
    if not len(hsps):
        return []
    query_of = hsps.context // 2
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(query_of)) + 1, [len(hsps)]]).tolist()
    return [(q, hsps.span(a, b)) for q, a, b in
            zip(query_of[bounds[:-1]].tolist(), bounds[:-1], bounds[1:])]


def prelim_hitlist_size(options: SearchOptions) -> int:
    """GetPrelimHitlistSize: room for more subjects in a gapped search, whose traceback may
    drop some."""
    n = options.max_target_seqs
    return max(n if options.ungapped else min(2 * n, n + 50), 10)


def best_first(items: list) -> list:
    """Order (ordinal, hsps) pairs, none without HSPs, as s_EvalueCompareHSPLists: best
    E-value (tiny ones equal), then best score, then the higher ordinal first; ties keep
    their order. The keys are worked out for all pairs at once, not in Python for each
    of a query's thousands of subjects, under the GIL."""
    return best_first_each([list(items)])[0]


def best_first_each(lists: list) -> list:
    """best_first of each list, all ranked in one pass: a batch of short reads has tens of
    thousands of queries with a few subjects each, and the calls per query cost more than
    the ranking."""
    sizes = [len(items) for items in lists]
    flat = [item for items in lists for item in items]
    if max(sizes, default=0) < 2:
        return [list(items) for items in lists]
    keys = ranking_keys(flat)
    owner = np.repeat(np.arange(len(lists)), sizes)
    order = np.lexsort((*_rank_columns(keys), owner)).tolist()
    ranked, start = [], 0
    for size in sizes:
        ranked.append([flat[i] for i in order[start:start + size]])
        start += size
    return ranked


@dataclass
class RankedSubjects:
    """A query's subjects with BLAST's ranking keys (s_EvalueCompareHSPLists): each one's
    global ordinal, best E-value and best score. Keys alone rank subjects searched in
    different places exactly as the subjects themselves would be ranked in one search."""

    ordinal: np.ndarray  # int64
    evalue: np.ndarray   # float64: the subject's best E-value
    score: np.ndarray    # int64: its best score

    def take(self, index) -> "RankedSubjects":
        return RankedSubjects(self.ordinal[index], self.evalue[index], self.score[index])

    @staticmethod
    def joined(parts: list) -> "RankedSubjects":
        return RankedSubjects(*(np.concatenate([getattr(part, name) for part in parts])
                                for name in ("ordinal", "evalue", "score")))


def ranking_keys(items: list) -> RankedSubjects:
    """The ranking keys of (ordinal, hsps) pairs, in their order; none without HSPs."""
    sizes = np.array([len(hsps) for _, hsps in items], dtype=np.int64)
    if not sizes.all():
        raise ValueError("ranking_keys: a subject without HSPs")
    starts = np.zeros(sizes.size, dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    evalue, score = joined([hsps for _, hsps in items], ("evalue", "score"))
    best = np.minimum.reduceat(evalue, starts)
    score = np.maximum.reduceat(score.astype(np.int64), starts)
    ordinal = np.array([ordinal for ordinal, _ in items], dtype=np.int64)
    return RankedSubjects(ordinal, best, score)


def rank_order(keys: RankedSubjects) -> np.ndarray:
    """The best-first order of subjects by their keys (best_first's); ordinals are unique
    within a query, so the order is total: it does not depend on the keys' order."""
    return np.lexsort(_rank_columns(keys))


def _rank_columns(keys: RankedSubjects) -> tuple:
    """The keys as np.lexsort takes them, the last one first: tiny E-values equal, then the
    higher score, then the higher ordinal."""
    from .stats import EVALUE_EQUAL_BELOW

    evalue = np.where(keys.evalue < EVALUE_EQUAL_BELOW, 0.0, keys.evalue)
    return -keys.ordinal, -keys.score, evalue


def prelim_hit_lists(prelim: PrelimHits, options: SearchOptions) -> dict:
    """Each query's preliminary hit list as trace_tasks cuts it ({query index:
    RankedSubjects}, best first): its best prelim_hitlist_size subjects. A part of the
    database gives its own lists; merged_hit_lists joins the parts' into the database's."""
    limit = prelim_hitlist_size(options)
    lists = {}
    for q, subjects in prelim.by_query.items():
        if subjects:
            keys = ranking_keys(list(subjects.items()))
            lists[q] = keys.take(rank_order(keys)[:limit])
    return lists


def merged_hit_lists(parts: list, options: SearchOptions) -> dict:
    """The whole database's preliminary hit lists ({query index: int64 ordinals}) from
    its parts' (prelim_hit_lists of disjoint sets of subjects): the best
    prelim_hitlist_size subjects of each query over all parts. The order is total and each
    part kept its own best, so these are the subjects one search's trace_tasks keeps."""
    limit = prelim_hitlist_size(options)
    by_query: dict = {}
    for lists in parts:
        for q, ranked in lists.items():
            by_query.setdefault(q, []).append(ranked)
    merged = {}
    for q, ranked in by_query.items():
        keys = RankedSubjects.joined(ranked)
        merged[q] = keys.ordinal[rank_order(keys)[:limit]]
    return merged


# ----------------------------------------------------------------------------------------------
# traceback and final processing of one query


@dataclass
class TraceTask:
    """The traceback of one query against one subject: a piece of work for a thread."""

    query_index: int      # within its batch
    ordinal: int          # the subject
    hsps: Hsps            # its preliminary HSPs
    work: int             # an estimate of the work (trace_tasks)
    tails: object = None  # TailsAhead: its traceback searches made ahead, if made


TASK_FIXED_WORK = 1000  # a task's work beyond its HSPs' query letters
# The DP cells (at least, traceback.trace_cells) a batch's tracebacks must compute per thread
# for the GPU to make them ahead: about 0.25 s of a CPU thread, a launch's time. -task blastn's
# passes over the database (about 1.5 thread-seconds of tracebacks each on synth 1G's
# q_medium) were slower with them, dc-megablast's large batch (50) faster (docs/perf)
TAILS_MIN_CELLS_PER_THREAD = 50_000_000
# A letter a DP traceback aligns on the CPU counts this many times one whose alignment was
# made ahead on the GPU (the CPU only tidies and counts it): the threads' shares stay even
UNMADE_DP_WEIGHT = 20


def trace_tasks(prelim: PrelimHits, options: SearchOptions, query_lengths: list) -> list:
    """The TraceTasks of a batch: each query's best prelim_hitlist_size subjects, the most
    work first, so that long tracebacks start first rather than one started last deciding
    when the batch ends. A task's work is the query letters its HSPs align plus a share for
    the fixed costs, reckoned for all tasks at once (a DP alignment left to the CPU weighs
    UNMADE_DP_WEIGHT times one made ahead on the GPU). With culling or the best-hit filter,
    the preliminary HSPs go through it first (query_lengths: the batch's queries'
    letters); culling keeps every subject with HSPs left, as blastn's culling writer."""
    from .hspfilters import has_query_filter, prelim_filtered

    by_query, limit = prelim.by_query, prelim_hitlist_size(options)
    if has_query_filter(options):
        by_query = prelim_filtered(by_query, query_lengths, options)
        if options.culling_limit:
            limit = None
    queries = list(by_query.items())
    ranked = best_first_each([list(subjects.items()) for _, subjects in queries])
    picked = [(q, ordinal, hsps) for (q, _), subjects in zip(queries, ranked)
              for ordinal, hsps in subjects[:limit]]
    if not picked:
        return []
    sizes = np.array([len(hsps) for _, _, hsps in picked], dtype=np.int64)
    q_end, q_start = joined([hsps for _, _, hsps in picked], ("q_end", "q_start"))
    aligned = q_end.astype(np.int64) - q_start
    work = np.add.reduceat(aligned, np.cumsum(sizes) - sizes) + TASK_FIXED_WORK
    tails = [prelim.tails.get(key[:2]) for key in picked] if prelim.tails else \
        [None] * len(picked)
    if not options.greedy:
        work += (UNMADE_DP_WEIGHT - 1) * (work - TASK_FIXED_WORK - _letters_made_ahead(tails))
    works = work.tolist()
    return [TraceTask(*picked[i], works[i], tails[i])
            for i in np.argsort(-work, kind="stable").tolist()]


def _letters_made_ahead(tails: list) -> np.ndarray:
    """Each task's query letters whose DP alignments were made ahead (its TailsAhead's made
    rows; none without one)."""
    from .layouts import HSP_Q_END, HSP_Q_START, TRACE_FIELDS

    made = np.zeros(len(tails), dtype=np.int64)
    have = [i for i, t in enumerate(tails) if t is not None and len(t.rows)]
    if have:
        rows = np.concatenate([tails[i].rows for i in have])
        flags = np.concatenate([tails[i].searches[:, TRACE_FIELDS] for i in have]) != 0
        letters = np.where(flags, rows[:, HSP_Q_END] - rows[:, HSP_Q_START], 0)
        sizes = np.array([len(tails[i].rows) for i in have])
        made[have] = np.add.reduceat(letters, np.cumsum(sizes) - sizes)
    return made


TRACE_GROUP_TASKS = 256  # traceback tasks in one compiled call, at most
GROUPS_PER_THREAD = 4  # traceback groups of a batch per thread: the threads finish together


@dataclass
class TraceGroup:
    """Traceback tasks of one volume, for one compiled call (traceback.traceback_group)."""

    volume: object
    tasks: list = field(default_factory=list)
    work: int = 0


def trace_groups(tasks: list, db, groups: int) -> list:
    """Traceback tasks (the most work first) in TraceGroups: a call per task spent most of
    the tracebacks' time in Python, one thread at a time under the GIL. A group takes at
    most TRACE_GROUP_TASKS tasks and about 1 / `groups` of the work (GROUPS_PER_THREAD per
    thread for a batch's tasks), so that the threads finish together; the groups come the
    most work first."""
    share = max(1, sum(task.work for task in tasks) // max(1, groups))
    volume_of = np.searchsorted([volume.first_ordinal for volume in db.volumes],
                                [task.ordinal for task in tasks], side="right") - 1
    made, open_groups = [], {}  # volume index -> its open group
    for task, v in zip(tasks, volume_of.tolist()):
        group = open_groups.get(v)
        if group is None or len(group.tasks) == TRACE_GROUP_TASKS or group.work >= share:
            group = open_groups[v] = TraceGroup(db.volumes[v])
            made.append(group)
        group.tasks.append(task)
        group.work += task.work
    return made



def query_result(query_index: int, query, traced: list, options: SearchOptions) -> QueryResult:
    """A query's result from its traced (ordinal, HSPs) pairs, in any order: the subjects
    with HSPs left, best first, max_target_seqs of them, through the HSP filters asked for
    (blastn's order: culling or the best-hit filter, then max_hsps and the query coverage
    test, then the subject best hit). The HSPs of a query searched in part (-query_loc) are
    placed on the whole query."""
    return query_results([(query_index, query, traced)], options)[0]


def query_results(entries: list, options: SearchOptions) -> list:
    """query_result of each (query index, query, traced pairs), their subjects ranked
    together. The ranking sees every HSP the traceback kept: blastn ranks a subject by
    its best E-value from before max_hsps and the query coverage test, and a subject
    they leave without HSPs still took its place among the max_target_seqs."""
    from .hspfilters import has_query_filter, traced_filtered

    ranked = best_first_each([[(o, h) for o, h in traced if len(h)]
                              for _, _, traced in entries])
    # blastn's hit list sorts each subject's HSPs by E-value once more subjects come than
    # it holds (Blast_HitListUpdate), and max_hsps keeps the first of that order
    evalue_ordered = [len(traced) > options.max_target_seqs for traced in ranked]
    ranked = [traced[:options.max_target_seqs] for traced in ranked]
    if has_query_filter(options):
        ranked = [best_first(traced_filtered(traced, query.searched_length, options))
                  for (_, query, _), traced in zip(entries, ranked)]
        evalue_ordered = [False] * len(ranked)
    ranked = within_hsp_limits(ranked, [query.searched_length for _, query, _ in entries],
                               evalue_ordered, options)
    return [_ranked_result(query_index, query, traced, options)
            for (query_index, query, _), traced in zip(entries, ranked)]


def _ranked_result(query_index: int, query, traced: list, options: SearchOptions) -> QueryResult:
    """query_result from the pairs left, in their final order."""
    from .hspfilters import subject_best_hit

    if options.subject_besthit:
        traced = [(o, subject_best_hit(h, query.searched_length)) for o, h in traced]
    if query.location is not None:
        traced = [(o, _on_whole_query(h, query)) for o, h in traced]
    return QueryResult(query_index, query.id, query.defline, len(query),
                       [SubjectHits(o, h) for o, h in traced])


def _on_whole_query(hsps: Hsps, query) -> Hsps:
    """HSPs of the letters -query_loc searched, their query coordinates moved onto the whole
    query: by the part's start on the plus strand, by the letters after its end on the
    minus strand (the contexts' coordinates count from each strand's start)."""
    minus = hsps.context % 2 == 1
    shift = np.where(minus, len(query) - query.location.end,
                     query.location.start).astype(np.int32)
    return replace(hsps, q_start=hsps.q_start + shift, q_end=hsps.q_end + shift,
                   q_gapped_start=hsps.q_gapped_start + shift)


def within_hsp_limits(lists: list, query_lengths: list, evalue_ordered: list,
                      options: SearchOptions) -> list:
    """Each list of (ordinal, HSPs) pairs (a query's subjects; its HSPs in E-value order)
    with each subject's HSPs cut to max_hsps (Blast_TrimHSPListByMaxHsps): the first in
    score order, or in their E-value order where evalue_ordered[i]; then without those
    covering less of the query (query_lengths[i] letters) than qcov_hsp_perc
    (Blast_HSPListReapByQueryCoverage). The order is kept, and subjects left without HSPs
    go. All pairs at once: a batch of short reads holds tens of thousands."""
    if not options.max_hsps and not options.qcov_hsp_perc:
        return lists
    # the pairs either limit may cut: most hold no more than max_hsps HSPs
    at = [(i, j) for i, traced in enumerate(lists) for j, (_, hsps) in enumerate(traced)
          if options.qcov_hsp_perc or len(hsps) > options.max_hsps]
    if not at:
        return lists
    owner = [i for i, _ in at]
    keep = _kept_by_limits([lists[i][j][1] for i, j in at],
                           np.asarray(query_lengths, dtype=np.float64)[owner],
                           np.asarray(evalue_ordered, dtype=bool)[owner], options)
    out = [list(traced) for traced in lists]
    for (i, j), kept in zip(at, keep):
        if kept is not None:
            ordinal, hsps = lists[i][j]
            out[i][j] = (ordinal, hsps.take(kept)) if kept.any() else None
    return [[pair for pair in traced if pair is not None] for traced in out]


def _kept_by_limits(pairs: list, lengths: np.ndarray, evalue_ordered: np.ndarray,
                    options: SearchOptions) -> list:
    """within_hsp_limits' mask of each pair's HSPs (pairs[i] on a query of lengths[i]
    letters, cut in E-value order where evalue_ordered[i]), or None where all are kept."""
    sizes = np.array([len(hsps) for hsps in pairs], dtype=np.int64)
    starts = np.zeros(sizes.size, dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    score, s_start, s_end, q_start, q_end = (
        part.astype(np.int64) for part in
        joined(pairs, ("score", "s_start", "s_end", "q_start", "q_end")))
    owner = np.repeat(np.arange(sizes.size), sizes)
    keep = np.ones(score.size, dtype=bool)
    if options.max_hsps:
        # each pair's places in score order, the pairs one after the other
        order = np.lexsort((-q_end, q_start, -s_end, s_start, -score, owner))
        place = np.empty(order.size, dtype=np.int64)
        place[order] = np.arange(order.size)
        place -= np.repeat(starts, sizes)
        in_order = np.repeat(evalue_ordered, sizes)
        place[in_order] = (np.arange(score.size) - np.repeat(starts, sizes))[in_order]
        keep &= place < options.max_hsps
    if options.qcov_hsp_perc:
        percent = 100.0 * (q_end - q_start) / np.repeat(lengths, sizes)
        percent = np.where(percent < 99, percent + 0.5, percent)  # query_coverage
        keep &= percent >= options.qcov_hsp_perc
    masks = [None] * sizes.size
    for i in np.flatnonzero(np.bincount(owner[~keep], minlength=sizes.size)).tolist():
        masks[i] = keep[starts[i]:starts[i] + sizes[i]]
    return masks


# ----------------------------------------------------------------------------------------------
# loading the compiled stages ahead of a search


WARM_UP_LENGTHS = (8_000, 800)  # made-up queries: a large batch's stages and a small one's
WARM_UP_QUERY_START = 40_000  # where the made-up queries are cut from the made-up subject


def warm_up(options: SearchOptions, query_letters: int | None = None, backend=None,
            trace: bool = True) -> int:
    """Search made-up queries against a made-up subject held in memory, with the engine's
    own stage times (a warm-up beside a search adds nothing to the search's). numba loads
    each stage's machine code from its cache at the stage's first call, and the loads wait
    for one another (its compiler lock); run in the background as a search starts, this
    takes them off the search's path while the GPU is set up. A batch of more than 8,000
    letters takes the megablast table and the diagonal hash, a small one the small table
    and the diagonal array: the kind `query_letters` (the query set's size, when known)
    calls for is loaded first, and the other only when the set makes several batches.
    `backend` (or the Future of its set-up, waited for here) is the search's scan backend:
    beside a GPU, the stages that run beside it are loaded (WarmUpDevice), not the CPU's
    scan and extensions, whose loading would hold the GIL beside the query setup. Without
    `trace`, the searches stop before the traceback (compile_ahead compiles it meanwhile).
    Returns how many HSPs it traced."""
    from .db.memory import MemoryVolume
    from .db.reader import sparse_letters, warm_up_bases_only, warm_up_letters
    from .dynprog import MAX_SUBJECT_OFFSET
    from .lookup import warm_up_standard_table
    from .output.linewriter import warm_up as output_warm_up
    from .ungapped import DIAG_HASH_QUERY_LENGTH

    rng = np.random.default_rng(0)
    # long enough to be aligned in windows, as chromosomes are
    subject = rng.integers(0, 4, MAX_SUBJECT_OFFSET + 10_000).astype(np.uint8)
    db = MemoryVolume([subject])
    device = _warm_up_backend(backend)
    times = StageTimes()
    engine = Engine(db, options, BackendPlan.resolve(device, options), times,
                    SubjectBuffers(times), sparse_letters)
    lengths = list(WARM_UP_LENGTHS)
    if query_letters is not None and 2 * query_letters <= DIAG_HASH_QUERY_LENGTH:
        lengths.reverse()
    # no database makes a first batch smaller than one without letters does
    if query_letters is not None and query_letters <= QueryBatchSizes(options.task, 0).letters:
        lengths = lengths[:1]  # one batch, of the kind loaded first

    def search(n: int) -> int:
        start = WARM_UP_QUERY_START
        return _made_up_search(engine, subject[start:start + n].copy(), trace)

    traced = search(lengths[0])
    output_warm_up()
    warm_up_letters()
    if not options.greedy:
        warm_up_standard_table()
    elif isinstance(device, WarmUpDevice):
        warm_up_bases_only()
    return traced + sum(search(n) for n in lengths[1:])


def _made_up_search(engine: Engine, codes: np.ndarray, trace: bool) -> int:
    """warm_up's search of one query cut from the made-up subject; returns HSPs traced."""
    from .query import Query

    codes[::97] = (codes[::97] + 1) % 4  # mismatches, for every kind of extension
    query = Query("warm-up", "warm-up", codes, np.zeros(codes.size, dtype=bool))
    plan = plan_batch([query], 0, engine.db, engine.options, engine.times)
    if plan.table is None:
        return 0
    gapped = engine.initial_hits(plan, engine.db, threads=1)
    if gapped.ahead is not None and gapped.pieces:
        # beside the GPU, whole chunks go in runs and cut pieces alone
        chunk, _ = gapped.pieces[0]
        gapped._extend_task([0, 0])
        gapped.extend_piece((chunk, np.arange(int(gapped.bounds[chunk + 1] -
                                                  gapped.bounds[chunk]))))
    prelim = PrelimHits()
    gapped.file_subjects(gapped.subject_hits(gapped.extend_later(INLINE)(), INLINE)(), prelim)
    if not trace:
        return 0
    groups = engine.trace_groups(engine.trace_tasks(prelim, plan), 1)
    return sum(len(hsps) for group in groups for _, hsps in engine.trace_group(group, plan))


def _warm_up_backend(backend):
    """The made-up search's scan backend: the CPU's, or beside a GPU (`backend`, or the
    Future of its set-up, makes greedy extensions ahead) a WarmUpDevice."""
    from concurrent.futures import Future

    from .scan.backend import CPU

    if isinstance(backend, Future):
        try:
            backend = backend.result()
        except Exception:  # noqa: BLE001 - no device: the search reports it, the CPU serves
            backend = None
    return WarmUpDevice() if backend is not None and backend.capabilities.greedy_ahead else CPU


class WarmUpDevice(Backend):
    """The GPU's part in warm_up, played on the CPU: its seeds are words of the made-up query
    where it lies in the made-up subject, and it leaves every greedy or DP extension to the
    CPU, which makes them through the compiled calls it takes beside the GPU."""

    name = "gpu"
    capabilities = Capabilities(scans_whole_volumes=True, greedy_ahead=True, dp_ahead=True)

    def find_seeds(self, table, subjects: SubjectBuffer, chunk_byte_offset, chunk_length,
                   num_threads=None, spread=None):
        from .scan import Seeds

        query_length = int(table.context_length[0])
        at = np.arange(5, query_length - table.word_size, 97, dtype=np.int64)  # no mismatch
        subject_at = WARM_UP_QUERY_START + at
        chunk_start = (np.asarray(chunk_byte_offset, dtype=np.int64) -
                       int(chunk_byte_offset[0])) * 4
        chunk = np.searchsorted(chunk_start, subject_at, side="right") - 1
        inside = subject_at + table.word_size <= chunk_start[chunk] + chunk_length[chunk]
        chunk, at, subject_at = chunk[inside], at[inside], subject_at[inside]
        s_off = (subject_at - chunk_start[chunk]).astype(np.int32)
        return Seeds(chunk.astype(np.int32), (int(table.context_offset[0]) + at).astype(np.int32),
                     s_off, s_off.copy(), s_off.copy())

    def greedy_extensions(self, subjects, chunk_byte_offset, chunk_length, hit_chunk, *args,
                          **kwargs) -> np.ndarray:
        return np.zeros((len(hit_chunk), GAPPED_AHEAD_FIELDS), dtype=np.int64)

    def dp_extensions(self, subjects, chunk_byte_offset, chunk_length, hits, *args,
                      **kwargs) -> np.ndarray:
        return np.zeros((len(hits), GAPPED_AHEAD_FIELDS), dtype=np.int64)
