"""Diagonal bookkeeping and ungapped X-drop extension of seeds (spec §4.3, §5.1).

Per chunk, seeds in scan order, as BLAST's s_BlastnDiagTableExtendInitialHit (concatenated
query <= 8000 letters) or s_BlastnDiagHashExtendInitialHit (longer) do in one-hit mode
(two-hit mode, which discontiguous megablast's window of 40 letters turns on, extends a seed
only when the last seed of its diagonal ended within the window and was not extended):

1. a seed whose (unslid) start ``s_first`` lies before the diagonal's ``last_hit`` is dropped;
2. the seed is extended (exact extension for W < 11; otherwise 4-at-a-time approximate, redone
   exactly when the approximate score reaches the context's reduced cutoff);
3. score >= the context's cutoff: an initial hit is saved and last_hit = its end; otherwise
   last_hit = the end of the W-seed.

The hash is not just a faster array: a cell of another diagonal is overwritten when it looks
stale, ``s_first - level > 1 - W`` (window 0, scan range 0), which can forget a diagonal's
last_hit that the array would keep, and which cell is reused depends on the order the chains
were built in. BLAST keeps one hash for a whole search of a query batch (one thread walks the
subjects in ordinal order), so `DiagonalHash` carries that state from chunk to chunk and volume
to volume: the chunks of a batch must be extended in database order through one instance.
Only up to a reset, though: once the subject offset the hash adds to its levels passes a
limit (HASH_OFFSET_LIMIT, about every 537 million letters), BLAST empties the hash, so the
chunks after a reset start from a fresh hash, and the stretches between resets may run in
parallel with the very same result.
The diagonal array has no such effect (its aliasing of diagonals never rejects a seed in
one-hit mode, and BLAST's offset trick amounts to a fresh array per chunk), so array searches
may extend chunks in any order and in parallel.

A scan that stops at a seed budget (scan.cpu.find_seeds_from) can cut a chunk between two
calls of extend_seeds: the chunk's diagonal state (the array's cells, or the hash's subject
offset, which moves on only at a chunk's end) and its hits so far go from one call to the
next in a `CutChunk`, as BLAST keeps them while it scans a subject in pieces of its
offset-pair buffer; the chunk's hits are sorted and returned once its last seed is in.

An extension depends only on its seed (and its context's X-drop and reduced cutoff), not on
the diagonal array or hash, which only decide which seeds are extended. A GPU therefore
extends every seed ahead (cuda/ungapped.cu, UngappedAhead), and then either this module's
in-order pass keeps its bookkeeping and looks the extensions up instead of making them, or
the device makes the pass too (cuda/diagonals.cu, DiagonalPass): the bookkeeping's state is
shared only within one cell of one chunk (the array) or one bucket's chain (the hash), so
each of those is walked by a thread, the hash's chains carried from call to call in
HashChains; only the initial hits come back.

Coordinates: query offsets are ours (concatenated, = BLAST's + 1); subject offsets are
chunk-relative.
"""

from dataclasses import dataclass

import numpy as np

from .alphabet import score_matrix
from .arrays import grown, joined_fields
from .layouts import HASH_BUCKETS, HASH_LANES, HIT_FIELDS, HSP_CONTEXT, HSP_FIELDS, HSP_Q_END, \
    HSP_Q_GAPPED_START, HSP_Q_START, HSP_S_END, HSP_S_GAPPED_START, HSP_S_START, HSP_SCORE, \
    UNGAPPED_FIELDS, UNGAPPED_LENGTH, UNGAPPED_Q_START, UNGAPPED_S_START, UNGAPPED_SCORE
from .lookup import LookupTable
from .numba_start import njit
from .pools import in_turn
from .refcounts import borrowed, prefetch
from .scan import Seeds
from .scan.cpu import CONTEXT_BLOCK_BITS, _split_chunks, context_at, subject_base, \
    subject_byte

DIAG_HASH_QUERY_LENGTH = 8000   # kQueryLenForHashTable
HASH_OFFSET_LIMIT = 2147483647 // 4  # Blast_ExtendWordExit: the hash is emptied beyond this


@dataclass
class InitialHits:
    chunk: np.ndarray     # int32
    q_start: np.ndarray   # int32, concatenated query offset of the ungapped alignment start
    s_start: np.ndarray   # int32, chunk-relative subject start
    length: np.ndarray    # int32
    score: np.ndarray     # int32, raw ungapped score
    seed_q: np.ndarray    # int32, the seed BLAST saves with the hit (q_off after s_TypeOfWord)
    seed_s: np.ndarray    # int32
    # int64, where hits are not yet in the order the seeds found them: that order's key
    # (each chunk's hits in order of it; sort_initial_hits puts them so)
    found: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.chunk.size)

    def of_chunks(self, first: int, end: int) -> "InitialHits":
        """The hits of chunks [first, end), renumbered from 0 (hits are in chunk order)."""
        if first == 0 and (self.chunk.size == 0 or int(self.chunk[-1]) < end):
            return self  # every hit, numbered as they are
        assert self.found is None, "hits in chunk order only"
        lo, hi = np.searchsorted(self.chunk, [first, end])
        return InitialHits(self.chunk[lo:hi] - np.int32(first), self.q_start[lo:hi],
                           self.s_start[lo:hi], self.length[lo:hi], self.score[lo:hi],
                           self.seed_q[lo:hi], self.seed_s[lo:hi])


@dataclass
class UngappedAhead:
    """Every seed's ungapped extension, made before the in-order pass (on a GPU):
    int32 rows [UNGAPPED_FIELDS, seeds], column i the extension of seed i whether or not
    the diagonal bookkeeping lets BLAST make it."""

    rows: np.ndarray

    def __len__(self) -> int:
        return int(self.rows.shape[1])

    def span(self, lo: int, hi: int) -> "UngappedAhead":
        return UngappedAhead(self.rows[:, lo:hi])


NOTHING_AHEAD = np.zeros((UNGAPPED_FIELDS, 0), dtype=np.int32)


@dataclass(frozen=True)
class UngappedRules:
    """What an extension of a seed depends on besides the seed, as a device reads it: int32
    per context the raw X-drop and the reduced cutoff (past which the approximate extension
    is redone exactly), the blastna score matrix (16 x 16) and nucl_score_table (256)."""

    xdrop: np.ndarray
    reduced_cutoff: np.ndarray
    matrix: np.ndarray
    score_table: np.ndarray


def ungapped_rules(ungapped_xdrop, reduced_cutoff, reward: int, penalty: int) -> UngappedRules:
    as32 = [np.ascontiguousarray(a, dtype=np.int32) for a in
            (ungapped_xdrop, reduced_cutoff, score_matrix(reward, penalty),
             nucl_score_table(reward, penalty))]
    return UngappedRules(*as32)


def joined_initial_hits(parts: list) -> InitialHits:
    """The hits of successive slices of a volume's chunks as one InitialHits: `parts` holds
    (first chunk of the slice, its hits numbered from 0), in chunk order."""
    if len(parts) == 1 and parts[0][0] == 0:
        return parts[0][1]
    fields = [np.concatenate([hits.chunk + np.int32(first) for first, hits in parts])]
    for name in ("q_start", "s_start", "length", "score", "seed_q", "seed_s"):
        fields.append(np.concatenate([getattr(hits, name) for _, hits in parts]))
    if parts[0][1].found is not None:
        fields.append(np.concatenate([hits.found for _, hits in parts]))
    return InitialHits(*fields)


def nucl_score_table(reward: int, penalty: int) -> np.ndarray:
    """Score of 4 aligned bases from the XOR of query and subject bytes: each 2-bit group
    is a match (0) or a mismatch."""
    x = np.arange(256)
    groups = np.stack([(x >> (2 * k)) & 3 for k in range(4)])
    return np.where(groups == 0, reward, penalty).sum(axis=0).astype(np.int32)


def uses_diag_hash(table: LookupTable) -> bool:
    """BLAST's container choice: last context's end, in BLAST coordinates, above 8000."""
    end = int(table.context_offset[-1]) - 1 + int(table.context_length[-1])
    return end > DIAG_HASH_QUERY_LENGTH


HASH_PARTS = 64     # the most parts of the buckets, each extended on its own (a power of two)
# the most parts a search's hash is cut into, whatever its threads: each part is a helper to
# start, under the GIL, in every call of a job's turn at the hash (docs/perf/whole-search.md)
SEARCH_HASH_PARTS = 8
NO_ORDER = np.zeros(0, dtype=np.int64)  # extend_chunks' seeds in their own order
PARALLEL_SEEDS = 1 << 18  # fewer seeds are extended part after part in the calling thread
SERIAL_HASH_THREADS = 2  # with this many threads or fewer, the hash is one part


def hash_parts(num_threads: int) -> int:
    """How many parts a batch's hash has: one per thread (a power of two, at most
    SEARCH_HASH_PARTS) for the threads to share out, and one with up to SERIAL_HASH_THREADS.
    Each part's seeds are a pass over the chunks' subject letters of their own, and each
    part of a turn's call waits for a helper to start, so more parts than the threads need
    cost time, and past 8 parts on 16 threads the helpers' starts cost more than the parts'
    share of the work saves. On 2 cores the scan and the gapped stage keep both busy beside
    the ungapped stage, and one part is cheapest (the measurements:
    docs/perf/whole-search.md)."""
    if num_threads <= SERIAL_HASH_THREADS:
        return 1
    parts = 1
    while parts < num_threads and parts < SEARCH_HASH_PARTS:
        parts *= 2
    return parts


class HashPart:
    """The chains of some of the diagonal hash's buckets, with its subject offset (BLAST
    starts it at the two-hit window)."""

    def __init__(self, window: int = 0):
        self.backbone = np.zeros(HASH_BUCKETS, dtype=np.int64)
        self.cell_diag = np.zeros(256, dtype=np.int64)
        self.cell_level = np.zeros(256, dtype=np.int64)
        self.cell_saved = np.zeros(256, dtype=np.int64)
        self.cell_next = np.zeros(256, dtype=np.int64)
        self.occupancy = 1
        self.offset = window


class DiagonalHash:
    """BLAST's diagonal hash (512 chained buckets) with its subject offset, carried across
    the chunks of one batch's search in database order. A seed reads and writes only the
    chain of its diagonal's bucket (a cell is reused only within its chain), so the buckets
    fall into `parts` that never meet: each part's seeds, in their order, give the hits the
    whole hash gives them, and the parts are extended side by side. The cells' numbering
    differs from one hash's, which decides nothing. `lanes`: the device's chains a bucket
    (device_hash_lanes)."""

    def __init__(self, parts: int = HASH_PARTS, window: int = 0, lanes: int = 1):
        self.parts = [HashPart(window) for _ in range(parts)]
        self.chains = HashChains(window, lanes=lanes)  # the same hash where a device walks it

    @property
    def offset(self) -> int:
        return self.parts[0].offset

    @offset.setter
    def offset(self, value: int) -> None:
        for part in self.parts:
            part.offset = value
        self.chains.offset = value

    def emptied(self) -> "DiagonalHash":
        """A new, empty hash of this one's kind."""
        return DiagonalHash(len(self.parts), self.chains.window, self.chains.lanes)


CHAIN_CELLS = 16  # cells each chain has room for on the device at first


def device_hash_lanes(window: int, word_size: int) -> int:
    """How many chains the device splits each bucket of the hash into, by diagonal (1 or
    HASH_LANES; cuda/diagonals.cu's hash_lane).

    A cell that BLAST reuses is stale: its level lies more than the stale window behind the
    seed that takes it. With a two-hit window at least the word size, a later seed on the
    stale cell's diagonal is neither dropped by that level (it starts past it) nor a second
    hit within the window of it, and so does what it would do with no cell at all: which
    cells share a chain, and which of them are reused, then decides no hit, and the
    diagonals of a bucket may go to chains of their own. With one-hit seeds (window 0) a
    stale cell can still drop a later seed, so the chains stay BLAST's."""
    return HASH_LANES if word_size <= window else 1


class HashChains:
    """The diagonal hash as the device's in-order pass (cuda/diagonals.cu) keeps it from one
    call to the next: each bucket's `lanes` chains (bucket b's lane k in row b * lanes + k of
    `diag`, `level` and `saved`), a chain's first count cells in the order they were added
    (the chain's head last), its epoch the number of resets before it was last written;
    and the subject offset and the number of resets that the next chunk starts from. The
    chains are grown when the device finds one full."""

    def __init__(self, window: int = 0, capacity: int = CHAIN_CELLS, lanes: int = 1):
        self.window = window
        self.offset = window
        self.resets = 0
        self.lanes = lanes
        chains = HASH_BUCKETS * lanes
        self.count = np.zeros(chains, dtype=np.int32)
        self.epoch = np.zeros(chains, dtype=np.int32)
        self.diag = np.zeros((chains, capacity), dtype=np.int32)
        self.level = np.zeros((chains, capacity), dtype=np.int64)
        self.saved = np.zeros((chains, capacity), dtype=np.int32)

    @property
    def capacity(self) -> int:
        return int(self.diag.shape[1])

    def grow(self) -> None:
        more = 3 * self.capacity
        self.diag, self.level, self.saved = (
            np.pad(a, ((0, 0), (0, more))) for a in (self.diag, self.level, self.saved))

    def chunk_offsets(self, chunk_length: np.ndarray) -> tuple:
        """The subject offset and the reset count each of these chunks, the next ones in
        database order, is walked with, and (offset, resets) after them: the rule of
        _extend_into's chunk loop (the offset grows by each chunk's length and the window;
        a chunk walked at HASH_OFFSET_LIMIT or beyond empties the hash after it), a run of
        chunks between two resets at a time."""
        n = int(chunk_length.size)
        steps = np.asarray(chunk_length, dtype=np.int64) + self.window
        offsets = np.empty(n, dtype=np.int64)
        epochs = np.empty(n, dtype=np.int32)
        offset, resets, first = self.offset, self.resets, 0
        while first < n:
            starts = offset + np.concatenate(([0], np.cumsum(steps[first:n - 1])))
            over = np.flatnonzero(starts >= HASH_OFFSET_LIMIT)
            end = first + (int(over[0]) + 1 if over.size else starts.size)
            offsets[first:end] = starts[:end - first]
            epochs[first:end] = resets
            if over.size:
                offset, resets = self.window, resets + 1
            else:
                offset = int(starts[-1] + steps[n - 1])
            first = end
        return offsets, epochs, (offset, resets)


@dataclass
class DiagonalPass:
    """What the in-order pass needs besides the seeds and their extensions, as a device
    reads it: the raw cutoff per context (int32), the two-hit window, the word size, and the
    diagonal hash's chains (None: the diagonal array, of diag_len cells)."""

    cutoff: np.ndarray
    window: int
    word_size: int
    diag_len: int
    chains: HashChains | None


def diagonal_pass(table: LookupTable, ungapped_cutoff, window: int,
                  diag_hash: DiagonalHash) -> DiagonalPass:
    """The in-order pass of a batch's table, with its DiagonalHash's chains when it uses the
    hash."""
    chains = diag_hash.chains if uses_diag_hash(table) else None
    return DiagonalPass(np.ascontiguousarray(ungapped_cutoff, dtype=np.int32), window,
                        table.word_size, diagonal_array_length(table.sequence.size, window),
                        chains)


def initial_hits_of_rows(rows: np.ndarray) -> InitialHits:
    """InitialHits from the device's HIT_FIELDS int32 rows, in the order they came."""
    return InitialHits(*(np.ascontiguousarray(rows[f]) for f in range(HIT_FIELDS)))


def diagonal_array_length(query_letters: int, window: int) -> int:
    """BLAST's diagonal array length: a power of two >= the query's length + the window
    (query_letters: the concatenated query with its sentinels)."""
    length = 1
    while length < query_letters - 2 + window:
        length <<= 1
    return length


class DiagonalArray:
    """The diagonal array (last hit and its flag per diagonal cell) with its subject offset:
    a fresh one per group of chunks (see the module's docstring)."""

    def __init__(self, length: int, window: int = 0):
        self.last_hit = np.zeros(length, dtype=np.int64)
        self.hit_saved = np.zeros(length, dtype=np.int64)
        self.offset = window


NO_ARRAY = DiagonalArray(1)  # the hash's searches read no array


class CutChunk:
    """What the calls of extend_seeds that one chunk's seeds are cut between carry from one
    to the next: whether the next call's first chunk goes on with this one (`open`), its
    diagonal array (searches with the hash carry the DiagonalHash instead), and its hits so
    far (the seven InitialHits fields, in the order they were found, numbered chunk 0); and
    how many seeds the calls before had, from which a call's `found` keys go on
    (extend_seeds' by_score=False)."""

    def __init__(self):
        self.open = False
        self.array: DiagonalArray | None = None
        self.hits: list | None = None
        self.seeds_before = 0  # the seeds of the calls before (their hits' `found` keys)


@njit(cache=True, nogil=True, inline="always")
def extend_exact(sequence, matrix, packed, byte_off, s_len, q_off, s_off, x_drop):
    """s_NuclUngappedExtendExact. x_drop > 0. Returns (q_start, s_start, length, score)."""
    neg_x = -x_drop
    # left: at most min(BLAST q_off, s_off) letters; BLAST q_off = ours - 1
    steps = min(q_off - 1, s_off)
    total = 0
    run = 0
    q_beg = q_off
    for k in range(1, steps + 1):
        run += matrix[sequence[q_off - k], subject_base(packed, byte_off, s_off - k)]
        if run > 0:
            q_beg = q_off - k
            total += run
            run = 0
        elif run < neg_x:
            break
    s_beg = s_off - (q_off - q_beg)
    # right, from the seed start; never below a total of 0
    q_avail = sequence.size - 1 - q_off
    s_avail = s_len - s_off
    steps = min(q_avail, s_avail)
    run = 0
    q_end = q_off
    x_now = neg_x
    for k in range(steps):
        run += matrix[sequence[q_off + k], subject_base(packed, byte_off, s_off + k)]
        if run > 0:
            q_end = q_off + k + 1
            total += run
            x_now = max(-total, neg_x)
            run = 0
        elif run < x_now:
            break
    return q_beg, s_beg, q_end - q_beg, total


@njit(cache=True, nogil=True)
def _query_byte(sequence, i):
    """BLAST packs four blastna letters with shifts, keeping the low 8 bits: ambiguity codes
    and sentinels spill into their neighbours' bits."""
    return ((np.int64(sequence[i]) << 6) | (np.int64(sequence[i + 1]) << 4)
            | (np.int64(sequence[i + 2]) << 2) | np.int64(sequence[i + 3])) & 0xFF


@njit(cache=True, nogil=True)
def query_bytes(sequence):
    """_query_byte at every offset of the query (0 for the last three, which start no
    group of four): one load per four letters in extend_approx's loops instead of four."""
    out = np.zeros(sequence.size, dtype=np.uint8)
    for i in range(sequence.size - 3):
        out[i] = _query_byte(sequence, i)
    return out


@njit(cache=True, nogil=True)
def extend_approx(sequence, matrix, score_table, packed, byte_off, s_len, q_off, s_off,
                  s_match_end, x_drop, reduced_cutoff):
    """s_NuclUngappedExtend: 4 letters at a time from the first byte boundary after s_off,
    redone exactly when the approximate score reaches reduced_cutoff."""
    return extend_approx_in(sequence, query_bytes(sequence), matrix, score_table, packed,
                            byte_off, s_len, q_off, s_off, s_match_end, x_drop,
                            reduced_cutoff)


@njit(cache=True, nogil=True, inline="always")
def extend_approx_in(sequence, q_bytes, matrix, score_table, packed, byte_off, s_len, q_off,
                     s_off, s_match_end, x_drop, reduced_cutoff):
    """extend_approx with the query's query_bytes at hand."""
    neg_x = -x_drop
    pad = (4 - (s_off & 3)) & 3
    q_ext = q_off + pad
    s_ext = s_off + pad
    n = min(q_ext - 1, s_ext) // 4
    total = 0
    run = 0
    new_q = q_ext
    qi, si = q_ext, s_ext
    for _ in range(n):
        run += score_table[q_bytes[qi - 4] ^ subject_byte(packed, byte_off, (si >> 2) - 1)]
        if run > 0:
            new_q = qi - 4
            total += run
            run = 0
        if run < neg_x:
            break
        qi -= 4
        si -= 4
    q_start = new_q
    s_start = s_ext - (q_ext - q_start)
    n = min(sequence.size - 1 - q_ext, s_len - s_ext) // 4
    run = 0
    new_q = q_ext
    qi, si = q_ext, s_ext
    for _ in range(n):
        run += score_table[q_bytes[qi] ^ subject_byte(packed, byte_off, si >> 2)]
        if run > 0:
            new_q = qi + 3
            total += run
            run = 0
        if run < neg_x:
            break
        qi += 4
        si += 4
    if total >= reduced_cutoff:
        return extend_exact(sequence, matrix, packed, byte_off, s_len, q_off, s_off, x_drop)
    length = max(s_match_end - s_start, new_q - q_start + 1)
    return q_start, s_start, length, total


@njit(cache=True, nogil=True)
def extend_chunks(seed_order, seed_q, seed_s, seed_first, ahead, chunk_bounds, first_chunk,
                  last_chunk, last_cut,
                  sequence, q_bytes, context_offset, contexts, packed, chunk_byte_offset,
                  chunk_length, matrix, score_table, xdrop, cutoff, reduced_cutoff, word_size,
                  window, use_hash, last_hit, hit_saved, backbone, cell_diag, cell_level,
                  cell_saved, cell_next, occupancy, offset):
    """Diagonal bookkeeping and extension for chunks [first_chunk, last_chunk); the seeds of
    chunk c are seed_*[seed_order[at]] for `at` in chunk_bounds[c]:chunk_bounds[c + 1] (`at`
    itself when seed_order is empty). `ahead`: UngappedAhead's rows, the seeds' extensions made
    already (none: empty rows). Returns the saved hits in processing order with the index of
    the seed each came from, then the diagonal hash's state for the next call (`offset`, the
    subject offset added to levels, is the array's too). The diagonal array (`last_hit`,
    `hit_saved`, diagonal_array_length's cells; one cell when use_hash) is updated in place.
    `last_cut`: the last chunk's seeds go on in a later call, so its end is not reached here
    (the offset stays, as BLAST's does between two pieces of one subject's scan).

    With a two-hit `window` (> 0), a seed is extended only when its diagonal's last seed was
    not (its flag `saved` is 0) and ends within `window` letters of it; otherwise it is
    stored as a first hit. BLAST's off-diagonal search for a partner never runs: its range,
    min(off_diagonal_range 0, window - W), is never above 0.

    The seeds go through _extend_into, which stops when a buffer is full; the buffers grow
    here, between its calls (an array rebound inside the seed loop costs numba reference
    counting on every seed)."""
    total_seeds = chunk_bounds[last_chunk] - chunk_bounds[first_chunk]
    cap = max(16, total_seeds // 8)
    o_chunk = np.empty(cap, dtype=np.int32)
    o_q = np.empty(cap, dtype=np.int32)
    o_s = np.empty(cap, dtype=np.int32)
    o_len = np.empty(cap, dtype=np.int32)
    o_score = np.empty(cap, dtype=np.int32)
    o_seed_q = np.empty(cap, dtype=np.int32)
    o_seed_s = np.empty(cap, dtype=np.int32)
    o_seed = np.empty(cap, dtype=np.int64)
    n_out = 0
    diag_len = last_hit.size
    # the diagonal hash (512 buckets of chained cells; index 0 means none) comes from the
    # previous call, as BLAST keeps it from subject to subject
    offset = np.int64(offset)
    c, at = first_chunk, chunk_bounds[first_chunk]
    while True:
        c, at, n_out, occupancy, offset = _extend_into(
            seed_order, seed_q, seed_s, seed_first, ahead, chunk_bounds, c, at, last_chunk,
            last_cut, sequence, q_bytes, context_offset, contexts, packed, chunk_byte_offset,
            chunk_length, matrix, score_table, xdrop, cutoff, reduced_cutoff, word_size,
            window, use_hash, diag_len, last_hit, hit_saved, backbone, cell_diag, cell_level,
            cell_saved, cell_next, occupancy, offset, o_chunk, o_q, o_s, o_len, o_score,
            o_seed_q, o_seed_s, o_seed, n_out)
        if c == last_chunk:
            break
        if n_out == o_chunk.size:
            o_chunk = grown(o_chunk, n_out + 1)
            o_q = grown(o_q, n_out + 1)
            o_s = grown(o_s, n_out + 1)
            o_len = grown(o_len, n_out + 1)
            o_score = grown(o_score, n_out + 1)
            o_seed_q = grown(o_seed_q, n_out + 1)
            o_seed_s = grown(o_seed_s, n_out + 1)
            o_seed = grown(o_seed, n_out + 1)
        if use_hash and occupancy == cell_diag.size:
            cell_diag = grown(cell_diag, occupancy + 1)
            cell_level = grown(cell_level, occupancy + 1)
            cell_saved = grown(cell_saved, occupancy + 1)
            cell_next = grown(cell_next, occupancy + 1)
    return (o_chunk[:n_out], o_q[:n_out], o_s[:n_out], o_len[:n_out], o_score[:n_out],
            o_seed_q[:n_out], o_seed_s[:n_out], o_seed[:n_out],
            backbone, cell_diag, cell_level, cell_saved, cell_next, occupancy, offset)


# how many seeds ahead the seed loop asks for the query's letters: the seeds come in subject
# order, so their query offsets jump about a query set of megabytes, and each extension
# waited for its first letters (kleb q_medium's ungapped samples: about -10 %; 16 ahead no
# better)
PREFETCH_SEEDS = 8


@njit(cache=True, nogil=True)
def _extend_into(seed_order, seed_q, seed_s, seed_first, ahead, chunk_bounds, first_chunk,
                 first_at, last_chunk, last_cut, sequence, q_bytes, context_offset, contexts,
                 packed, chunk_byte_offset, chunk_length, matrix, score_table, xdrop, cutoff,
                 reduced_cutoff, word_size, window, use_hash, diag_len, last_hit, hit_saved,
                 backbone, cell_diag, cell_level, cell_saved, cell_next, occupancy, offset,
                 o_chunk, o_q, o_s, o_len, o_score, o_seed_q, o_seed_s, o_seed, n_out):
    """extend_chunks' seed loop from seed `first_at` of chunk first_chunk (the last chunk
    left open when `last_cut`, as extend_chunks says). Returns (c, at, n_out, occupancy,
    offset): c == last_chunk when done; otherwise it stopped before seed
    `at` of chunk c, with the output rows or the hash's cells full."""
    sequence, q_bytes, context_offset, packed = borrowed(sequence), borrowed(q_bytes), \
        borrowed(context_offset), borrowed(packed)
    contexts = borrowed(contexts)
    matrix, score_table = borrowed(matrix), borrowed(score_table)
    ordered = seed_order.size > 0
    made = ahead.shape[1] > 0
    exact_only = word_size < 11
    stale_window = window + min(0, window - word_size) + 1  # window + Delta + 1
    for c in range(first_chunk, last_chunk):
        byte_off = chunk_byte_offset[c]
        s_len = np.int64(chunk_length[c])
        chunk_end = chunk_bounds[c + 1]
        for at in range(first_at if c == first_chunk else chunk_bounds[c], chunk_end):
            if n_out == o_chunk.size or (use_hash and occupancy == cell_diag.size):
                return c, at, n_out, occupancy, offset
            if at + PREFETCH_SEEDS < chunk_end:
                later = seed_order[at + PREFETCH_SEEDS] if ordered else at + PREFETCH_SEEDS
                q_later = np.int64(seed_q[later])
                prefetch(q_bytes, q_later)
                prefetch(sequence, q_later)
                prefetch(contexts, q_later >> CONTEXT_BLOCK_BITS)
            i = seed_order[at] if ordered else at
            q_off = np.int64(seed_q[i])
            s_off = np.int64(seed_s[i])
            s_first_pos = np.int64(seed_first[i]) + offset
            diag = s_off - q_off
            if use_hash:
                level, saved = np.int64(0), np.int64(0)
                k = backbone[diag & 511]
                while k != 0:
                    if cell_diag[k] == diag:
                        level, saved = cell_level[k], cell_saved[k]
                        break
                    k = cell_next[k]
            else:
                cell = (s_off + diag_len - q_off) & (diag_len - 1)
                level, saved = last_hit[cell], hit_saved[cell]
            if s_first_pos < level:
                continue
            s_end_pos = s_off + word_size + offset
            ready = 0
            qs, ss, ln, sc = 0, 0, 0, 0
            # in two-hit mode, a seed that is no second hit is only kept on its diagonal
            if window == 0 or (saved == 0 and s_end_pos <= level + window):
                ctx = context_at(contexts, context_offset, q_off)
                if made:
                    qs = np.int64(ahead[UNGAPPED_Q_START, i])
                    ss = np.int64(ahead[UNGAPPED_S_START, i])
                    ln = np.int64(ahead[UNGAPPED_LENGTH, i])
                    sc = np.int64(ahead[UNGAPPED_SCORE, i])
                elif exact_only:
                    qs, ss, ln, sc = extend_exact(sequence, matrix, packed, byte_off, s_len,
                                                  q_off, s_off, xdrop[ctx])
                else:
                    qs, ss, ln, sc = extend_approx_in(sequence, q_bytes, matrix, score_table,
                                                      packed, byte_off, s_len, q_off, s_off,
                                                      s_off + word_size, xdrop[ctx],
                                                      reduced_cutoff[ctx])
                ready = 1 if sc >= cutoff[ctx] else 0
            if ready:
                o_chunk[n_out] = c
                o_q[n_out] = qs
                o_s[n_out] = ss
                o_len[n_out] = ln
                o_score[n_out] = sc
                o_seed_q[n_out] = q_off
                o_seed_s[n_out] = s_off
                o_seed[n_out] = i
                n_out += 1
                s_end_pos = ln + ss + offset
            if use_hash:
                # s_BlastDiagHashInsert: own cell, else the first stale cell, else a new one
                bucket = diag & 511
                k = backbone[bucket]
                done = False
                while k != 0:
                    if cell_diag[k] == diag or s_first_pos - cell_level[k] > stale_window:
                        cell_diag[k] = diag
                        cell_level[k] = s_end_pos
                        cell_saved[k] = ready
                        done = True
                        break
                    k = cell_next[k]
                if not done:
                    cell_diag[occupancy] = diag
                    cell_level[occupancy] = s_end_pos
                    cell_saved[occupancy] = ready
                    cell_next[occupancy] = backbone[bucket]
                    backbone[bucket] = occupancy
                    occupancy += 1
            else:
                last_hit[cell] = s_end_pos
                hit_saved[cell] = ready
        if last_cut and c == last_chunk - 1:
            break
        # BLAST's Blast_ExtendWordExit: every old entry becomes stale
        if offset >= HASH_OFFSET_LIMIT:
            offset = window
            if use_hash:
                backbone[:] = 0
                occupancy = 1
            else:
                last_hit[:] = 0
                hit_saved[:] = 0
        else:
            offset += s_len + window
    return last_chunk, 0, n_out, occupancy, offset


def by_hash_part(q_off, s_off, parts: int, spread=None) -> tuple:
    """The seeds' indices grouped by the part of the diagonal hash their diagonal's bucket
    is in, each group in seed order, and where each part's group starts (parts + 1
    bounds). A counting sort, its two passes over the seeds cut into ranges that `spread`
    runs side by side (pools.on_threads; one after the other without it): each range
    counts its seeds of each part, and writes them from where the earlier ranges' end."""
    n = q_off.size
    pieces = max(1, min(PARTITION_RANGES, n // PARTITION_SEEDS)) if spread else 1
    if pieces == 1:  # a thread pool's start and its calls would cost more than the sort
        spread = None
    ranges = np.linspace(0, n, pieces + 1).astype(np.int64)
    counts = np.zeros((ranges.size - 1, parts), dtype=np.int64)
    spread = spread or in_turn
    spread(lambda r: _count_parts(q_off, s_off, ranges[r], ranges[r + 1], counts[r]),
           ranges.size - 1)
    bounds = np.zeros(parts + 1, dtype=np.int64)
    np.cumsum(counts.sum(axis=0), out=bounds[1:])
    # where each range's seeds of each part go: after the part's seeds of earlier ranges
    starts = bounds[:-1] + np.cumsum(counts, axis=0) - counts
    order = np.empty(n, dtype=np.int64)
    spread(lambda r: _place_parts(q_off, s_off, ranges[r], ranges[r + 1], starts[r], order),
           ranges.size - 1)
    return order, bounds


PARTITION_RANGES = 64  # ranges of seeds partitioned side by side, at most
# seeds a range at least. With threads started for each call, a slice's 0.4 M seeds in 64
# ranges on 16 threads took 18 ms, held by the job in its ungapped turn; on the kept
# spread threads a turn's run of up to 1 M seeds is sorted in ranges of 2^16 (synth 1G's
# q_small on 16 threads: 2.33-2.55 s against 2.52-2.69 s sorted by the turn's own thread,
# docs/perf/whole-search.md)
PARTITION_SEEDS = 1 << 16


@njit(cache=True, nogil=True)
def _hash_part(q, s, parts):
    return ((np.int64(s) - np.int64(q)) & (HASH_BUCKETS - 1)) & (parts - 1)


@njit(cache=True, nogil=True)
def _count_parts(q_off, s_off, lo, hi, counts):
    """Count the seeds [lo, hi) of each hash part into counts."""
    parts = counts.size
    for i in range(lo, hi):
        counts[_hash_part(q_off[i], s_off[i], parts)] += 1


@njit(cache=True, nogil=True)
def _place_parts(q_off, s_off, lo, hi, at, order):
    """Write the seeds [lo, hi) into order, each at its part's next place (at: the range's
    first place in each part, advanced)."""
    at = at.copy()
    parts = at.size
    for i in range(lo, hi):
        p = _hash_part(q_off[i], s_off[i], parts)
        order[at[p]] = i
        at[p] += 1


def _extend_hash_parts(seeds: Seeds, state: DiagonalHash, run, chunks: int, spread,
                       parallel_seeds: int = PARALLEL_SEEDS) -> list:
    """extend_chunks over all chunks for each part of the hash's buckets, with that part's
    seeds in their order, the parts run by `spread` when there are at least
    `parallel_seeds` seeds; the hits of all parts, part after part, each with the index of
    its seed (the eighth field: in_seed_order puts them in the order one pass over every
    seed finds them)."""
    if len(state.parts) == 1:
        return list(run(NO_ORDER, seeds.chunk, (0, chunks), state.parts[0], NO_ARRAY))
    parallel = len(seeds) >= parallel_seeds
    order, bounds = by_hash_part(seeds.q_off, seeds.s_off, len(state.parts),
                                 spread if parallel else None)
    found = [None] * len(state.parts)

    def run_part(p):
        part_order = order[bounds[p]:bounds[p + 1]]
        found[p] = run(part_order, seeds.chunk[part_order], (0, chunks), state.parts[p],
                       NO_ARRAY)

    (spread if parallel else in_turn)(run_part, len(state.parts))
    return [np.concatenate([f[i] for f in found]) for i in range(8)]


def in_seed_order(fields: list) -> list:
    """The seven fields of hits whose eighth is their seeds' indices, in seed order."""
    in_order = np.argsort(fields[7], kind="stable")
    return [field[in_order] for field in fields[:7]]


def ungapped_hsp_rows(q_start, s_start, length, score, seed_q, seed_s, batch) -> np.ndarray:
    """An ungapped search's HSPs of one chunk: its initial hits as they are, int64 rows
    (hsp_rows) in hit order, query offsets context-relative, the seed as the start point
    (BLAST_GetUngappedHSPList)."""
    from .gapped import hit_contexts

    contexts = hit_contexts(q_start, batch)
    base = np.asarray(batch.context_offset, dtype=np.int64)[contexts]
    rows = np.empty((contexts.size, HSP_FIELDS), dtype=np.int64)
    rows[:, HSP_CONTEXT] = contexts
    rows[:, HSP_Q_START] = np.asarray(q_start, dtype=np.int64) - base
    rows[:, HSP_Q_END] = rows[:, HSP_Q_START] + length
    rows[:, HSP_S_START] = s_start
    rows[:, HSP_S_END] = rows[:, HSP_S_START] + length
    rows[:, HSP_SCORE] = score
    rows[:, HSP_Q_GAPPED_START] = np.asarray(seed_q, dtype=np.int64) - base
    rows[:, HSP_S_GAPPED_START] = seed_s
    return rows


def sort_initial_hits(hits: InitialHits) -> InitialHits:
    """Per chunk, Blast_InitHitListSortByScore: score desc, s_start asc, length desc,
    q_start asc (ties left in processing order: the hits' order, or `found` where given).
    The fields are new arrays: those given may be views of a whole slice's buffers, which
    they would keep."""
    order = np.argsort(hits.chunk, kind="stable") if hits.found is None else \
        np.lexsort((hits.found, hits.chunk))
    chunk_start = np.flatnonzero(np.diff(hits.chunk[order], prepend=-1, append=-1))
    _sort_chunks_by_score(order, chunk_start, *(
        np.ascontiguousarray(getattr(hits, f), dtype=np.int32)
        for f in ("score", "s_start", "length", "q_start")))
    return InitialHits(*(getattr(hits, f)[order] for f in
                         ("chunk", "q_start", "s_start", "length", "score", "seed_q", "seed_s")))


@njit(cache=True, nogil=True)
def _sort_chunks_by_score(order, chunk_start, score, s_start, length, q_start):
    """Sort order[chunk_start[c]:chunk_start[c + 1]] for each chunk c: a stable merge sort
    of the hits' indices in sort_initial_hits' order (numpy's lexsort of the four keys took
    2.7 times as long)."""
    buffer = np.empty(0, dtype=order.dtype)
    for c in range(chunk_start.size - 1):
        lo, hi = chunk_start[c], chunk_start[c + 1]
        if hi - lo > buffer.size:
            buffer = np.empty(hi - lo, dtype=order.dtype)
        _merge_sort(order[lo:hi], buffer, score, s_start, length, q_start)


@njit(cache=True, nogil=True)
def _merge_sort(items, buffer, score, s_start, length, q_start):
    """Bottom-up stable merge sort of `items` (hit indices), through `buffer`."""
    n = items.size
    width = 1
    source, target = items, buffer[:n]
    in_buffer = False
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j = lo, mid
            for k in range(lo, hi):
                if i < mid and (j >= hi or not _ranks_before(source[j], source[i], score,
                                                             s_start, length, q_start)):
                    target[k] = source[i]
                    i += 1
                else:
                    target[k] = source[j]
                    j += 1
        source, target = target, source
        in_buffer = not in_buffer
        width *= 2
    if in_buffer:
        items[:] = source


@njit(cache=True, nogil=True)
def _ranks_before(a, b, score, s_start, length, q_start):
    """Whether hit a comes before hit b: higher score, then lower s_start, then longer,
    then lower q_start."""
    if score[a] != score[b]:
        return score[a] > score[b]
    if s_start[a] != s_start[b]:
        return s_start[a] < s_start[b]
    if length[a] != length[b]:
        return length[a] > length[b]
    return q_start[a] < q_start[b]


def _extend_array_ranges(seeds: Seeds, run, chunk_length, num_threads: int, spread,
                         array_of) -> list:
    """extend_chunks over groups of chunks (4 * num_threads when num_threads > 1), each with
    the diagonal array array_of(first chunk, end) gives it; the hits in chunk order, each
    with the index of its seed (the eighth field)."""
    k = int(chunk_length.size)
    ranges = _split_chunks(chunk_length, 4 * num_threads) if num_threads > 1 else [(0, k)]
    parts = [None] * len(ranges)

    def run_range(r):
        parts[r] = run(NO_ORDER, seeds.chunk, ranges[r], HashPart(), array_of(*ranges[r]))

    spread(run_range, len(ranges))
    return joined_fields(parts, 8)


def _with_cut_chunk(fields: list, carry: CutChunk | None, cut: bool, chunks: int) -> list:
    """The hits of the chunks this call finished: a first chunk that a previous call began
    gets that call's hits in front of its own; a last chunk that a later call goes on with
    keeps its hits in `carry`, numbered chunk 0 (the next call's first)."""
    if carry is not None and carry.open:
        fields = [np.concatenate((held, found)) for held, found in zip(carry.hits, fields)]
        carry.hits = None
    if cut:
        lo = int(np.searchsorted(fields[0], chunks - 1))
        carry.hits = [f[lo:] for f in fields]
        carry.hits[0] = np.zeros_like(carry.hits[0])
        fields = [f[:lo] for f in fields]
    return fields


def extend_seeds(seeds: Seeds, table: LookupTable, packed: np.ndarray,
                 chunk_byte_offset: np.ndarray, chunk_length: np.ndarray,
                 ungapped_xdrop: np.ndarray, ungapped_cutoff: np.ndarray,
                 reduced_cutoff: np.ndarray, reward: int, penalty: int,
                 num_threads: int = 1, diag_hash: DiagonalHash | None = None,
                 spread=None, window: int = 0,
                 ahead: UngappedAhead | None = None, carry: CutChunk | None = None,
                 cut: bool = False, parallel_seeds: int = PARALLEL_SEEDS,
                 by_score: bool = True) -> InitialHits:
    """Ungapped extension of all seeds (as ``find_seeds`` returns them).

    ``ungapped_xdrop``, ``ungapped_cutoff``, ``reduced_cutoff``: int32 per context (raw X > 0,
    raw cutoff, (int)(0.8 * cutoff)). The word size and the query come from ``table``.
    For queries that use the diagonal hash, ``diag_hash`` is the batch's `DiagonalHash`
    (chunks then run in order, each part of the hash's buckets on its own); a fresh one is
    used when it is None. The pieces (the hash's parts; else 4 * num_threads groups of
    chunks when num_threads > 1) are run by `spread` (pools.on_threads; one after the other
    without it). ``window``: the two-hit window (0: every seed is extended); a DiagonalHash
    given must have been made with it. `ahead`: the seeds' extensions made already
    (UngappedAhead), looked up instead of made.

    A chunk's seeds may come in more than one call, in order (a scan stopped at a seed
    budget, find_seeds_from): `cut` says that the last chunk's seeds go on in the next call,
    and `carry`, the same CutChunk for every call of one sequence of chunks, takes its state
    and hits from this call to the next. A cut chunk's hits come with the call that ends it.
    `parallel_seeds`: the fewest seeds whose hash parts `spread` runs side by side.
    `by_score`: each chunk's hits in sort_initial_hits' order. Else unsorted, not even in
    chunk order, with the order the seeds found them as `found` (each seed's index, after
    those of the calls before with the same `carry`), and a cut chunk's hits left with
    each call: the caller joins its calls' hits and sort_initial_hits puts them in order,
    out of its turn at the diagonal hash (the parts' hits merged in seed order there took
    about a sixth of a turn at 16 threads, docs/perf/whole-search.md).
    """
    spread = spread or in_turn
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    chunk_byte_offset = np.ascontiguousarray(chunk_byte_offset, dtype=np.int64)
    chunk_length = np.ascontiguousarray(chunk_length, dtype=np.int32)
    k = int(chunk_length.size)
    matrix = score_matrix(reward, penalty).astype(np.int64)
    score_table = nucl_score_table(reward, penalty).astype(np.int64)
    per_ctx = [np.ascontiguousarray(a, dtype=np.int64) for a in
               (ungapped_xdrop, ungapped_cutoff, reduced_cutoff)]
    use_hash = uses_diag_hash(table)
    state = diag_hash if diag_hash is not None else DiagonalHash(window=window)
    made = NOTHING_AHEAD if ahead is None else np.ascontiguousarray(ahead.rows, dtype=np.int32)
    q_bytes = table.query_bytes

    def run(order, chunk, rng, part, array):
        """extend_chunks of the seeds `order` picks (all when it is empty), whose chunks are
        `chunk`, in chunks rng[0]:rng[1], with the hash `part` or the diagonal `array`."""
        # needles of the seeds' own type: int64 ones would have numpy cast every seed's
        # chunk to int64 first (a slice's worth of fresh memory each call)
        bounds = np.searchsorted(chunk, np.arange(k + 1, dtype=chunk.dtype),
                                 side="left").astype(np.int64)
        out = extend_chunks(order, seeds.q_off, seeds.s_off, seeds.s_first, made, bounds,
                            rng[0], rng[1], cut and rng[1] == k, table.sequence, q_bytes,
                            table.context_offset, table.offset_contexts, packed,
                            chunk_byte_offset, chunk_length, matrix, score_table, *per_ctx,
                            table.word_size, window, use_hash, array.last_hit,
                            array.hit_saved, part.backbone, part.cell_diag, part.cell_level,
                            part.cell_saved, part.cell_next, part.occupancy,
                            part.offset if use_hash else array.offset)
        (part.backbone, part.cell_diag, part.cell_level, part.cell_saved, part.cell_next,
         part.occupancy, offset) = out[8:]
        if use_hash:
            part.offset = offset
        else:
            array.offset = offset
        return out[:8]

    if use_hash:
        fields = _extend_hash_parts(seeds, state, run, k, spread, parallel_seeds)
    else:
        length = diagonal_array_length(table.sequence.size, window)
        carried = carry.array if carry is not None and carry.open else None

        def array_of(first: int, end: int) -> DiagonalArray:
            # a cut chunk's array goes on; other groups start a fresh one
            array = carried if first == 0 and carried is not None else \
                DiagonalArray(length, window)
            if cut and end == k:
                carry.array = array
            return array

        fields = _extend_array_ranges(seeds, run, chunk_length, num_threads, spread, array_of)
    if not by_score:
        found = fields[7].astype(np.int64)
        if carry is not None:
            carry.open = cut
            found += carry.seeds_before
            carry.seeds_before += len(seeds)
        return InitialHits(*(np.ascontiguousarray(f, dtype=np.int32) for f in fields[:7]),
                           found=found)
    parted = use_hash and len(state.parts) > 1
    fields = _with_cut_chunk(in_seed_order(fields) if parted else fields[:7], carry, cut, k)
    if carry is not None:
        carry.open = cut
    return sort_initial_hits(InitialHits(*(np.ascontiguousarray(f, dtype=np.int32)
                                           for f in fields)))
