"""Query lookup tables: which one BLAST would choose, and the tables themselves.

Coordinates. Every query offset stored here is a *concatenated* offset into
``QueryBatch.sequence`` (ours). Our concatenated layout starts with a sentinel at 0, so our
offset is BLAST's offset (relative to ``query->sequence``) plus one. Where BLAST compares an
offset with a bound it derives from ``query->length``, the scan code translates (see
``blast_length`` below).

A *word* is ``width`` (w) bases packed two bits per base, first base most significant
(A=0 C=1 G=2 T=3); it is the index of every table below.

Layouts (the GPU kernels read the same arrays):

* **small** (``kind == TABLE_SMALL``): ``backbone`` int16[4^w]: -1 empty; >= 0 the one query
  offset of that word; < -1 the negated start of a run in ``overflow`` int16[]. A run lists the
  offsets in increasing order and ends with -1. Runs start at index 2, so pointers are <= -2.
* **megablast** (``kind == TABLE_MEGABLAST``): each word's chain head is the offset of
  the *last* inserted position of the word (0 = empty; BLAST stores q_off + 1, which is our
  offset); ``next_pos`` int32[len(sequence)] chains to the previous position of the same
  word (0 ends). Walking ``q = head(i); while q: use(q); q = next_pos[q]`` gives decreasing
  offsets. BLAST keeps the heads in a 4^w array, which the GPU scan reads (the device
  makes it from the table: ``dense_hashtable`` on the host); the table keeps only the heads
  of the words present: ``present`` uint32[4^w / 32] has bit ``i & 31`` of word ``i >> 5``
  set when word ``i`` has offsets, ``present_rank`` the set bits before each of its words,
  and ``heads`` the heads in word order, so
  ``head(i) = heads[present_rank[i >> 5] + set bits of present[i >> 5] below i & 31]``
  (``chain_head``). A 12-letter table is then 4 MB and 4 bytes a word present instead of
  64 MB, and a word without offsets is told from a bit in 2 MB, not a 64 MB array's cache
  miss. ``pv`` uint32[] is BLAST's presence vector: the word ``i`` may have hits only if
  ``pv[i >> pv_bts] & (1 << (i & 31))``; one bit may stand for several words (§3.6).
* **standard** (``kind == TABLE_STANDARD``): CSR. The offsets of word ``i`` are
  ``offsets[cell_start[i]:cell_start[i + 1]]`` in increasing order; ``pv`` with ``pv_bts`` = 5
  (one bit per word; ``present`` is the same array).

* **discontiguous** (megablast's layout, ``template_length`` > 0): the table word is the
  ``template_length`` (T) letters of a window read through a template, which keeps W of them
  (its '1' positions); the index is those letters packed in order, first most significant.
  Each template has a megablast table: the first's in ``next_pos``, ``heads``, ``present``
  and ``present_rank``, the second's (coding_and_optimal; empty otherwise) in the same
  names ending in 2; one ``pv`` serves both. The seed is the whole window:
  ``word_size`` = ``width`` = T, ``scan_step`` 1, so no mini-extension and no s_TypeOfWord
  (BLAST's word finder takes T for both lengths). A template is kept as TEMPLATE_RUNS runs
  of consecutive kept letters: the index is the sum over runs of
  ``(window >> shift) & mask``, the window packed as the table words are (last letter in the
  lowest bits).

All kinds also carry what the mini-extension and BLAST's s_TypeOfWord check need:
``word_size`` (W), ``width`` (w), ``scan_step``, ``check_masks`` (BLAST's
``masked_locations != NULL``: the W-seed must be covered by table words at their exact query
positions), the query, its contexts, and ``blast_length``.
"""

import threading
from dataclasses import dataclass

import numpy as np

from .layouts import TABLE_MEGABLAST, TABLE_SMALL, TABLE_STANDARD
from .numba_start import njit
from .options import SearchOptions
from .query import QueryBatch
from .pools import INLINE, spread_map
from .wordrun import set_bits


SMALL_OFFSET_LIMIT = 32768     # small-table offsets and overflow indices are Int2
PV_TARGET_BYTES = 131072       # kTargetPVSize
PV_SMALL_QUERY = 15000         # kSmallQueryCutoff
PV_LARGE_QUERY = 800000        # kLargeQueryCutoff
TEMPLATE_RUNS = 8              # runs of kept letters a template is held as (11-of-21 coding: 8)

# BLAST's discontiguous templates (blast_nalookup.h, read left to right; 1 = letter kept) by
# (word size, template length, kind)
TEMPLATES = {
    (11, 16, "coding"): "1101101101101101",
    (11, 16, "optimal"): "1110010110110111",
    (12, 16, "coding"): "1111101101101101",
    (12, 16, "optimal"): "1110110110110111",
    (11, 18, "coding"): "101101100101101101",
    (11, 18, "optimal"): "111010010110010111",
    (12, 18, "coding"): "101101101101101101",
    (12, 18, "optimal"): "111010110010110111",
    (11, 21, "coding"): "100101100101100101101",
    (11, 21, "optimal"): "111010010100010010111",
    (12, 21, "coding"): "100101101101100101101",
    (12, 21, "optimal"): "111010010110010010111",
}


@dataclass
class LookupTable:
    kind: int
    word_size: int            # W
    width: int                # w, letters per table word
    scan_step: int            # W - w + 1
    check_masks: bool         # s_TypeOfWord verifies the seed against the table
    num_entries: int          # BLAST's EstimateNumTableEntries
    max_q_off: int            # its max_off (BLAST coordinates, inclusive)
    longest_chain: int
    # small table
    backbone: np.ndarray      # int16 [4^w] (empty array for other kinds)
    overflow: np.ndarray      # int16 []
    # megablast table (a discontiguous one's first template)
    next_pos: np.ndarray      # int32 [len(sequence)]
    heads: np.ndarray         # int32 [words present] chain heads in word order
    present: np.ndarray       # uint32 [4^w / 32] a bit per word with offsets (the standard
                              # table's is its pv)
    present_rank: np.ndarray  # int32 [4^w / 32] present's set bits before each of its words
    # standard table
    cell_start: np.ndarray    # int32 [4^w + 1]
    offsets: np.ndarray       # int32 []
    # presence vector (megablast, standard)
    pv: np.ndarray            # uint32 []
    pv_bts: int
    # discontiguous words (template_length 0: contiguous)
    template_length: int
    template_shift: np.ndarray  # int64 [templates, TEMPLATE_RUNS]
    template_mask: np.ndarray   # int64 [templates, TEMPLATE_RUNS] (0: no run)
    # the second template's megablast table (empty with one)
    next_pos2: np.ndarray       # int32 [len(sequence)]
    heads2: np.ndarray          # int32 [words present]
    present2: np.ndarray        # uint32 [4^W / 32]
    present_rank2: np.ndarray   # int32 [4^W / 32]
    # the query as the extension sees it
    sequence: np.ndarray        # uint8 blastna, QueryBatch.sequence
    context_offset: np.ndarray  # int32
    context_length: np.ndarray  # int32
    # s_TypeOfWord's look-ups (check_masks only; empty otherwise): bit q (of byte q >> 3,
    # least significant first) is set when the table lists query offset q. It lists an
    # offset under the query's own w-mer there and no other, so "the table lists q under
    # word" is that bit and the query's word at q equal to `word`: reads of small arrays
    # instead of a walk through a 4^w table (a cache miss a look-up)
    listed_offsets: np.ndarray  # uint8 [ceil(len(sequence) / 8)]

    @property
    def query_words(self) -> tuple:
        """`sequence` as packed bases and ambiguity bits (wordrun.pack_query_words), which
        the CPU scan's mini-extension compares with packed subjects a word at a time."""
        from .wordrun import pack_query_words
        return self._made_once("query_words", lambda: pack_query_words(self.sequence))

    @property
    def query_quads(self) -> np.ndarray:
        """scan.cpu.query_quads of `sequence`, for the CPU scan's mini-extensions."""
        from .scan.cpu import query_quads
        return self._made_once("query_quads", lambda: query_quads(self.sequence))

    @property
    def offset_contexts(self) -> np.ndarray:
        """scan.cpu.offset_contexts: each query offset's context, for the CPU scan and the
        ungapped stage."""
        from .scan.cpu import offset_contexts
        return self._made_once("offset_contexts",
                               lambda: offset_contexts(self.context_offset, self.sequence.size))

    @property
    def query_bytes(self) -> np.ndarray:
        """ungapped.query_bytes of `sequence`, for the ungapped stage's extensions (once a
        batch, not once a slice)."""
        from .ungapped import query_bytes
        return self._made_once("query_bytes", lambda: query_bytes(self.sequence))

    def _made_once(self, name: str, make):
        """The query's array `name`, made at its first use and kept. Made under a lock: the
        jobs' threads ask for it at once, and each copy made beside another lives through
        its thread's scan (16 threads held 62 copies of a megablast batch's contexts, 380 MB
        of the search's peak)."""
        made = self.__dict__.get(name)
        if made is None:
            with _QUERY_ARRAYS_LOCK:
                made = self.__dict__.get(name)
                if made is None:
                    made = self.__dict__[name] = make()
        return made

    @property
    def blast_length(self) -> int:
        """BLAST's query->length: concatenated length without the two outer sentinels."""
        return int(self.sequence.size) - 2

    def drop_words(self) -> None:
        """Let go of the word index once every volume of the batch is scanned: the later
        stages read the query (`sequence`, the contexts) only, and a batch waits for its
        tracebacks long after its scan (tens of MB a batch)."""
        for name in ("backbone", "overflow", "next_pos", "heads", "present", "present_rank",
                     "cell_start", "offsets", "pv", "next_pos2", "heads2", "present2",
                     "present_rank2", "listed_offsets"):
            setattr(self, name, _NO_WORDS[name])
        for name in ("query_words", "query_quads", "offset_contexts", "query_bytes"):
            self.__dict__.pop(name, None)


_QUERY_ARRAYS_LOCK = threading.Lock()  # LookupTable._made_once's

# drop_words' empty arrays, of each field's type
_NO_WORDS = {name: np.zeros(0, dtype=dtype) for name, dtype in (
    ("backbone", np.int16), ("overflow", np.int16), ("next_pos", np.int32),
    ("heads", np.int32), ("present", np.uint32), ("present_rank", np.int32),
    ("cell_start", np.int32), ("offsets", np.int32), ("pv", np.uint32),
    ("next_pos2", np.int32), ("heads2", np.int32), ("present2", np.uint32),
    ("present_rank2", np.int32), ("listed_offsets", np.uint8))}


def estimate_entries(segments: np.ndarray) -> tuple:
    """BLAST's EstimateNumTableEntries: sum of (right - left) over the segments with
    inclusive right ends (one less than the length), and the largest right end, both in
    BLAST coordinates (our offset - 1)."""
    if len(segments) == 0:
        return 0, 0
    seg = np.asarray(segments, dtype=np.int64)
    entries = int(np.sum(seg[:, 1] - seg[:, 0] - 1))
    max_off = int(max(0, np.max(seg[:, 1] - 2)))
    return entries, max_off


def choose_table(word_size: int, entries: int, max_q_off: int) -> tuple:
    """BlastChooseNaLookupTable (contiguous words): (kind, width)."""
    e, w = entries, word_size
    small, mega = TABLE_SMALL, TABLE_MEGABLAST
    if w <= 6:
        kind, width = small, w
    elif w == 7:
        kind, width = small, (6 if e < 250 else 7)
    elif w == 8:
        kind, width = small, (7 if e < 8500 else 8)
    elif w == 9:
        kind, width = (small, 7) if e < 1250 else (small, 8) if e < 21000 else (mega, 9)
    elif w == 10:
        kind, width = ((small, 7) if e < 1250 else (small, 8) if e < 8500
                       else (mega, 9) if e < 18000 else (mega, 10))
    elif w == 11:
        kind, width = (small, 8) if e < 12000 else (mega, 10) if e < 180000 else (mega, 11)
    elif w == 12:
        kind, width = ((small, 8) if e < 8500 else (mega, 9) if e < 18000
                       else (mega, 10) if e < 60000 else (mega, 11) if e < 900000
                       else (mega, 12))
    else:
        kind, width = (small, 8) if e < 8500 else (mega, 11) if e < 300000 else (mega, 12)
    # the small table keeps offsets in 15 bits
    if kind == TABLE_SMALL and (e >= 32767 or max_q_off >= SMALL_OFFSET_LIMIT):
        kind = TABLE_STANDARD
    return kind, width


@njit(cache=True, nogil=True)
def _list_words(sequence, segments, word_size, width):
    """Every indexable word as (index, offset), in BLAST's insertion order: segments in
    order, offsets increasing; segments shorter than W skipped; words with an ambiguous
    letter (blastna >= 4) skipped."""
    total = 0
    for k in range(segments.shape[0]):
        n = segments[k, 1] - segments[k, 0]
        if n >= word_size and n >= width:
            total += n - width + 1
    index = np.empty(total, dtype=np.int64)
    offset = np.empty(total, dtype=np.int32)
    count = _walk_words(sequence, segments, word_size, width, index, offset,
                        np.zeros(0, dtype=np.uint8))
    return index[:count], offset[:count]


@njit(cache=True, nogil=True)
def _walk_words(sequence, segments, word_size, width, index, offset, listed):
    """The walk of _list_words and _listed_offsets: every indexable word in BLAST's
    insertion order, stored as (index, offset) where `index` is not empty (room for them
    all) and as its offset's bit in `listed` where that is not empty. Returns their
    count."""
    mask = (1 << (2 * width)) - 1
    store, mark = index.size > 0, listed.size > 0
    count = 0
    for k in range(segments.shape[0]):
        start, end = segments[k, 0], segments[k, 1]
        if end - start < word_size:
            continue
        word, valid = 0, 0
        for p in range(start, end):
            word, valid = _next_word(word, valid, sequence[p], mask)
            if valid >= width:
                q = p - width + 1
                if store:
                    index[count] = word
                    offset[count] = q
                if mark:
                    listed[q >> 3] |= np.uint8(1 << (q & 7))
                count += 1
    return count


@njit(cache=True, nogil=True)
def _next_word(word, valid, letter, mask):
    """The word ending at `letter` and the count of letters since the last ambiguity
    (blastna >= 4), which starts the word again."""
    if letter >= 4:
        return 0, 0
    return ((word << 2) | letter) & mask, valid + 1


@njit(cache=True, nogil=True)
def _build_small(index, offset, size):
    """Backbone/overflow of BLAST's small table; returns (backbone, overflow, needed,
    longest). ``needed`` is the overflow size BLAST computes (fallback when >= 32768)."""
    counts = np.zeros(size, dtype=np.int64)
    for i in range(index.size):
        counts[index[i]] += 1
    needed = 2
    longest = 0
    for i in range(size):
        if counts[i] > 1:
            needed += counts[i] + 1
        if counts[i] > longest:
            longest = counts[i]
    backbone = np.full(size, -1, dtype=np.int16)
    if needed >= 32768:
        return backbone, np.zeros(0, dtype=np.int16), needed, longest
    # runs are laid out in word order; offsets inside a run in insertion order
    start = np.zeros(size, dtype=np.int64)
    cursor = 2
    for i in range(size):
        if counts[i] > 1:
            start[i] = cursor
            backbone[i] = -cursor
            cursor += counts[i] + 1
    overflow = np.full(cursor, -1, dtype=np.int16)
    fill = start.copy()
    for i in range(index.size):
        cell = index[i]
        if counts[cell] == 1:
            backbone[cell] = offset[i]
        else:
            overflow[fill[cell]] = offset[i]
            fill[cell] += 1
    return backbone, overflow, needed, longest


@njit(cache=True, nogil=True)
def _sort_words(sequence, segments, word_size, width, shift, cursor, offsets, words):
    """The indexable words of `segments` (in _list_words' order) by cell range, word >>
    `shift`: each word's offset, and its bits below the range's (`words`, 16 bits), at
    cursor[its range], which moves on. With `offsets` empty, only counts them there."""
    mask = (1 << (2 * width)) - 1
    counting = offsets.size == 0
    for k in range(segments.shape[0]):
        start, end = segments[k, 0], segments[k, 1]
        if end - start < word_size:
            continue
        word, valid = 0, 0
        for p in range(start, end):
            word, valid = _next_word(word, valid, sequence[p], mask)
            if valid >= width:
                at = cursor[word >> shift]
                if not counting:
                    offsets[at] = p - width + 1
                    words[at] = word & 0xFFFF
                cursor[word >> shift] = at + 1


@njit(cache=True, nogil=True)
def _mark_present(words, first, last, high, present, pv, pv_bts):
    """The bits of the sorted words first..last-1 (one cell range, whose words' bits above
    the 16 in `words` are `high`) in present and pv."""
    for i in range(first, last):
        word = high | np.int64(words[i])
        present[word >> 5] |= np.uint32(1) << np.uint32(word & 31)
        pv[word >> pv_bts] |= np.uint32(1) << np.uint32(word & 31)


@njit(cache=True, nogil=True)
def _set_bits_before(present):
    """present_rank (the set bits of present[:i], for each i) and the set bits in all."""
    rank = np.empty(present.size, dtype=np.int32)
    total = 0
    for i in range(present.size):
        rank[i] = total
        total += set_bits(np.uint64(present[i]))
    return rank, total


@njit(cache=True, nogil=True, inline="always")
def head_index(present, present_rank, word):
    """Where a present word's chain head is in a contiguous megablast table's heads."""
    bits = np.uint64(present[word >> 5])
    below = bits & ((np.uint64(1) << np.uint64(word & 31)) - np.uint64(1))
    return np.int64(present_rank[word >> 5]) + np.int64(set_bits(below))


@njit(cache=True, nogil=True, inline="always")
def chain_head(heads, present, present_rank, word):
    """The chain head of a contiguous megablast table's word: its last query offset, 0 when
    it has none."""
    if (present[word >> 5] >> (word & 31)) & 1 == 0:
        return np.int64(0)
    return np.int64(heads[head_index(present, present_rank, word)])


@njit(cache=True, nogil=True)
def _insert_sorted(offsets, words, first, last, high, heads, present, present_rank,
                   next_pos):
    """Insert the sorted words first..last-1, which all fall in one cell range (`high`, as
    _mark_present's). Our offset is BLAST's q_off + 1, so it is stored as is."""
    for i in range(first, last):
        word, offset = high | np.int64(words[i]), offsets[i]
        head = head_index(present, present_rank, word)
        next_pos[offset] = heads[head]
        heads[head] = offset


def dense_hashtable(heads: np.ndarray, present: np.ndarray) -> np.ndarray:
    """A megablast table's chain heads (heads, present: a LookupTable's, or its second
    template's) as BLAST's 4^w array, which the GPU scan reads (made there by seeds.cu's
    scatter_heads)."""
    hashtable = np.zeros(present.size << 5, dtype=np.int32)
    hashtable[np.flatnonzero(np.unpackbits(present.view(np.uint8), bitorder="little"))] = heads
    return hashtable


NO_TEMPLATE = np.zeros((0, TEMPLATE_RUNS), dtype=np.int64)  # a contiguous table's templates
PARALLEL_TABLE_WORDS = 1_000_000  # below this, one thread fills the megablast table
# the megablast table's parts filled side by side (a power of 2): 256 leave 16 bits of a
# 12-letter word to keep while the words are sorted by range
TABLE_CELL_RANGES = 256


def _build_megablast(sequence, segments, word_size, width, entries, pool=INLINE):
    """next_pos, heads, present, present_rank, pv and pv_bts of a megablast table (the
    module's layouts), on the threads of `pool`."""
    pv_words, pv_bts = megablast_pv_shape(width, entries)
    next_pos = np.zeros(sequence.size, dtype=np.int32)
    present = np.zeros(1 << (2 * width - 5), dtype=np.uint32)
    pv = np.zeros(pv_words, dtype=np.uint32)
    if entries < PARALLEL_TABLE_WORDS:
        pool = INLINE
    heads, present_rank = _fill_megablast(sequence, segments, word_size, width, next_pos,
                                          present, pv, pv_bts, pool)
    return next_pos, heads, present, present_rank, pv, pv_bts


def _fill_megablast(sequence, segments, word_size, width, next_pos, present, pv, pv_bts,
                    pool) -> tuple:
    """Insert the indexable words (as _list_words finds them, in its order), on the threads
    of `pool`; returns (heads, present_rank). Each thread sorts the words of its share of
    the segments by cell range (counts them, then places them); each range's words are
    marked present by one thread, the present words counted, and then each range's words
    are inserted in order by one thread. A range's cells are a 256th of the table, so its
    insertions mostly hit the cache: inserted in the batch's order, a large batch's words
    miss the cache at nearly every insertion, and threads that each read the whole batch
    and keep the words of their own cells each take as long as one thread
    (docs/perf/start-up.md)."""
    if not len(segments):
        return np.zeros(0, dtype=np.int32), np.zeros(present.size, dtype=np.int32)
    shift = max(2 * width - TABLE_CELL_RANGES.bit_length() + 1, pv_bts)  # whole pv words
    ranges = (1 << (2 * width)) >> shift
    lengths = np.cumsum(segments[:, 1] - segments[:, 0])
    shares = pool.threads
    cuts = np.searchsorted(lengths, lengths[-1] * np.arange(1, shares) / shares, side="right")
    bounds = [0] + cuts.tolist() + [len(segments)]
    share_segments = [segments[lo:hi] for lo, hi in zip(bounds, bounds[1:])]
    counts = np.zeros((shares, ranges), dtype=np.int64)
    none32 = np.zeros(0, dtype=np.int32)
    none16 = np.zeros(0, dtype=np.uint16)

    def count(k):
        _sort_words(sequence, share_segments[k], word_size, width, shift, counts[k], none32,
                    none16)

    spread_map(pool, count, range(shares))
    # range-major, shares in order within a range: each range's words in _list_words' order
    cursor = np.zeros(shares * ranges, dtype=np.int64)
    np.cumsum(counts.T.ravel()[:-1], out=cursor[1:])
    cursor = cursor.reshape(ranges, shares).T.copy()
    range_start = np.append(cursor[0], counts.sum())
    total = int(range_start[-1])
    offsets = np.empty(total, dtype=np.int32)
    words = np.empty(total, dtype=np.uint16)

    def place(k):
        _sort_words(sequence, share_segments[k], word_size, width, shift, cursor[k], offsets,
                    words)

    spread_map(pool, place, range(shares))

    def mark(r):
        _mark_present(words, range_start[r], range_start[r + 1], r << shift, present, pv,
                      pv_bts)

    spread_map(pool, mark, range(ranges))
    present_rank, words_present = _set_bits_before(present)
    heads = np.zeros(words_present, dtype=np.int32)

    def insert(r):
        _insert_sorted(offsets, words, range_start[r], range_start[r + 1], r << shift, heads,
                       present, present_rank, next_pos)

    spread_map(pool, insert, range(ranges))
    return heads, present_rank


@njit(cache=True, nogil=True)
def _build_standard(index, offset, size):
    cell_start = np.zeros(size + 1, dtype=np.int32)
    for i in range(index.size):
        cell_start[index[i] + 1] += 1
    longest = 0
    for i in range(size):
        if cell_start[i + 1] > longest:
            longest = cell_start[i + 1]
        cell_start[i + 1] += cell_start[i]
    offsets = np.empty(index.size, dtype=np.int32)
    fill = cell_start[:size].copy()
    pv = np.zeros((size >> 5) + 1, dtype=np.uint32)
    for i in range(index.size):
        cell = index[i]
        offsets[fill[cell]] = offset[i]
        fill[cell] += 1
        pv[cell >> 5] |= np.uint32(1) << np.uint32(cell & 31)
    return cell_start, offsets, pv, longest


def template_runs(template: str) -> tuple:
    """(shift, mask) of each run of kept letters of a template, TEMPLATE_RUNS of each (mask 0
    past the last run): ``(window >> shift) & mask`` puts the run's letters where they go in
    the index, the window's last letter in its lowest two bits."""
    import re

    length, weight = len(template), template.count("1")
    shifts = np.zeros(TEMPLATE_RUNS, dtype=np.int64)
    masks = np.zeros(TEMPLATE_RUNS, dtype=np.int64)
    for run, found in enumerate(re.finditer("1+", template)):
        kept_after = template[found.end():].count("1")  # the index's letters right of the run
        window_low = 2 * (length - found.end())
        index_low = 2 * kept_after
        shifts[run] = window_low - index_low
        masks[run] = ((1 << (2 * len(found.group()))) - 1) << index_low
    return shifts, masks


def kept_letters(shifts: np.ndarray, masks: np.ndarray) -> int:
    """A template's kept letters as the bits of an integer (the window's last letter bit 0),
    from its runs: the GPU scan's TEMPLATE_0 / TEMPLATE_1."""
    window_bits = 0
    for shift, mask in zip(shifts.tolist(), masks.tolist()):
        window_bits |= mask << shift
    return sum(1 << k for k in range(32) if (window_bits >> (2 * k)) & 3)


def template_arrays(options: SearchOptions) -> tuple:
    """template_runs of the options' template(s): coding_and_optimal reads both, coding first
    (BLAST's second template is the optimal one of the same word size and length)."""
    kinds = (("coding", "optimal") if options.template_type == "coding_and_optimal"
             else (options.template_type,))
    runs = [template_runs(TEMPLATES[(options.word_size, options.template_length, kind)])
            for kind in kinds]
    return (np.ascontiguousarray([shift for shift, _ in runs]),
            np.ascontiguousarray([mask for _, mask in runs]))


@njit(cache=True, nogil=True, inline="always")
def template_index(window, shifts, masks, t):
    """The table index of a window of letters read through template t (its TEMPLATE_RUNS
    runs: a bound the compiler knows, so the loop is unrolled in the scan's)."""
    index = np.int64(0)
    for r in range(TEMPLATE_RUNS):
        index |= (window >> shifts[t, r]) & masks[t, r]
    return index


@njit(cache=True, nogil=True)
def _fill_discontiguous(sequence, segments, length, shifts, masks, t, heads, present,
                        present_rank, next_pos, pv, pv_bts):
    """s_FillDiscMBTable for template t: every window of `length` letters inside a segment and
    free of ambiguities, in increasing offset, chained as the megablast table's words are.
    With `heads` empty, only marks each window's word in present and pv."""
    window_mask = (np.int64(1) << (2 * length)) - 1
    marking = heads.size == 0
    for k in range(segments.shape[0]):
        window, valid = np.int64(0), 0
        for p in range(segments[k, 0], segments[k, 1]):
            window, valid = _next_word(window, valid, sequence[p], window_mask)
            if valid >= length:
                index = template_index(window, shifts, masks, t)
                if marking:
                    present[index >> 5] |= np.uint32(1) << np.uint32(index & 31)
                    pv[index >> pv_bts] |= np.uint32(1) << np.uint32(index & 31)
                else:
                    offset = p - length + 1
                    head = head_index(present, present_rank, index)
                    next_pos[offset] = heads[head]
                    heads[head] = offset


def _build_discontiguous(batch: QueryBatch, options: SearchOptions, segments: np.ndarray,
                         sequence: np.ndarray, entries: int, max_q_off: int) -> LookupTable:
    """BLAST's discontiguous megablast table (BlastMBLookupTableNew with a template): a
    megablast table per template (the module's layout), one presence vector."""
    weight, length = int(options.word_size), int(options.template_length)
    shifts, masks = template_arrays(options)
    pv_words, pv_bts = megablast_pv_shape(weight, entries)
    pv = np.zeros(pv_words, dtype=np.uint32)
    tables = []
    for t in range(shifts.shape[0]):
        next_pos = np.zeros(sequence.size, dtype=np.int32)
        present = np.zeros(1 << (2 * weight - 5), dtype=np.uint32)
        _fill_discontiguous(sequence, segments, length, shifts, masks, t, _NO_WORDS["heads"],
                            present, _NO_WORDS["present_rank"], next_pos, pv, pv_bts)
        present_rank, words_present = _set_bits_before(present)
        heads = np.zeros(words_present, dtype=np.int32)
        _fill_discontiguous(sequence, segments, length, shifts, masks, t, heads, present,
                            present_rank, next_pos, pv, pv_bts)
        tables.append(dict(next_pos=next_pos, heads=heads, present=present,
                           present_rank=present_rank))
    second = {name + "2": array for name, array in tables[1].items()} if len(tables) > 1 \
        else {name + "2": _NO_WORDS[name + "2"] for name in tables[0]}
    return LookupTable(
        kind=TABLE_MEGABLAST, word_size=length, width=length, scan_step=1, check_masks=False,
        num_entries=entries, max_q_off=max_q_off, longest_chain=0,
        backbone=_NO_WORDS["backbone"], overflow=_NO_WORDS["overflow"], **tables[0],
        cell_start=_NO_WORDS["cell_start"], offsets=_NO_WORDS["offsets"], pv=pv,
        pv_bts=int(pv_bts), template_length=length, template_shift=shifts,
        template_mask=masks, **second, sequence=sequence,
        context_offset=np.ascontiguousarray(batch.context_offset, dtype=np.int32),
        context_length=np.ascontiguousarray(batch.context_length, dtype=np.int32),
        listed_offsets=_NO_WORDS["listed_offsets"])


def megablast_pv_shape(width: int, entries: int) -> tuple:
    """(pv words, pv_bts) of BLAST's megablast table (§3.6)."""
    hashsize = 1 << (2 * width)
    if hashsize <= 8 * PV_TARGET_BYTES:
        pv_size = hashsize >> 5
    else:
        pv_size = PV_TARGET_BYTES // 4
    if entries <= PV_SMALL_QUERY or entries >= PV_LARGE_QUERY:
        pv_size //= 2
    return pv_size, int(hashsize // pv_size).bit_length() - 1


def warm_up_standard_table() -> None:
    """Load (or compile) the standard table's builder, which only query sets of more than
    32,767 words with a small word size use: engine.warm_up's made-up searches are smaller."""
    sequence = np.zeros(16, dtype=np.uint8)
    index, offset = _list_words(sequence, np.array([[0, 16]], dtype=np.int32), 7, 7)
    _build_standard(index, offset, 1 << 14)


def build_lookup(batch: QueryBatch, options: SearchOptions, pool=INLINE) -> LookupTable:
    """The lookup table BLAST would build for this batch (spec §3); a megablast table is
    filled on the threads of `pool`."""
    word_size = int(options.word_size)
    segments = np.ascontiguousarray(batch.lookup_segments, dtype=np.int32).reshape(-1, 2)
    sequence = np.ascontiguousarray(batch.sequence, dtype=np.uint8)
    entries, max_q_off = estimate_entries(segments)
    if options.template_length:
        return _build_discontiguous(batch, options, segments, sequence, entries, max_q_off)
    kind, width = choose_table(word_size, entries, max_q_off)
    size = 1 << (2 * width)
    if kind != TABLE_MEGABLAST:
        index, offset = _list_words(sequence, segments, word_size, width)
    empty16 = np.zeros(0, dtype=np.int16)
    empty32 = np.zeros(0, dtype=np.int32)
    backbone, overflow, next_pos = empty16, empty16, empty32
    heads, present_rank = empty32, empty32
    cell_start, offsets, pv, pv_bts = empty32, empty32, np.zeros(0, dtype=np.uint32), 5
    present = np.zeros(0, dtype=np.uint32)
    longest = 0
    if kind == TABLE_SMALL:
        backbone, overflow, needed, longest = _build_small(index, offset, size)
        if needed >= 32768:
            kind, backbone, overflow = TABLE_STANDARD, empty16, empty16
    if kind == TABLE_MEGABLAST:
        next_pos, heads, present, present_rank, pv, pv_bts = _build_megablast(
            sequence, segments, word_size, width, entries, pool)
        longest = 0
    elif kind == TABLE_STANDARD:
        cell_start, offsets, pv, longest = _build_standard(index, offset, size)
        present = pv  # a bit per word already
    # BLAST's masked_locations: always for the small table when W > w, for the others only
    # with mask-at-hash (soft masking); it exists whenever there is any lookup segment
    has_segments = len(segments) > 0
    if kind == TABLE_SMALL:
        check = word_size > width and has_segments
    else:
        check = word_size > width and has_segments and bool(options.soft_masking)
    listed = _listed_offsets(sequence, segments, word_size, width) if check else \
        _NO_WORDS["listed_offsets"]
    return LookupTable(
        kind=kind, word_size=word_size, width=width, scan_step=word_size - width + 1,
        check_masks=bool(check), num_entries=entries, max_q_off=max_q_off,
        longest_chain=int(longest), backbone=backbone, overflow=overflow, next_pos=next_pos,
        heads=heads, present=present, present_rank=present_rank, cell_start=cell_start,
        offsets=offsets, pv=pv, pv_bts=int(pv_bts), template_length=0,
        template_shift=NO_TEMPLATE, template_mask=NO_TEMPLATE,
        next_pos2=_NO_WORDS["next_pos2"], heads2=_NO_WORDS["heads2"],
        present2=_NO_WORDS["present2"], present_rank2=_NO_WORDS["present_rank2"],
        sequence=sequence,
        context_offset=np.ascontiguousarray(batch.context_offset, dtype=np.int32),
        context_length=np.ascontiguousarray(batch.context_length, dtype=np.int32),
        listed_offsets=listed)


@njit(cache=True, nogil=True)
def _listed_offsets(sequence, segments, word_size, width):
    """LookupTable.listed_offsets: a bit for each offset _list_words lists (without its
    arrays, 12 bytes a letter of a large batch)."""
    listed = np.zeros((sequence.size + 7) // 8, dtype=np.uint8)
    _walk_words(sequence, segments, word_size, width, np.zeros(0, dtype=np.int64),
                np.zeros(0, dtype=np.int32), listed)
    return listed


def words_of(table: LookupTable, word: int) -> np.ndarray:
    """Query offsets of one table word, in the order BLAST's scanner emits them."""
    if table.kind == TABLE_SMALL:
        v = int(table.backbone[word])
        if v == -1:
            return np.zeros(0, dtype=np.int32)
        if v >= 0:
            return np.array([v], dtype=np.int32)
        out, k = [], -v
        while table.overflow[k] >= 0:
            out.append(int(table.overflow[k]))
            k += 1
        return np.array(out, dtype=np.int32)
    if table.kind == TABLE_MEGABLAST:  # a discontiguous table: its first template's
        q = int(chain_head(table.heads, table.present, table.present_rank, word))
        out = []
        while q:
            out.append(q)
            q = int(table.next_pos[q])
        return np.array(out, dtype=np.int32)
    return table.offsets[table.cell_start[word]:table.cell_start[word + 1]].copy()
