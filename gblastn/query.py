"""Query batch: both strands of each query as contexts, masks, and lookup segments.

Layout of the concatenated query (as BLAST's SetupQueries): a sentinel (15), context 0 (query 0
plus strand), a sentinel, context 1 (query 0 reverse complement), a sentinel, context 2, ...
and a final sentinel. ``context_offset[c]`` = ``context_offset[c-1] + context_length[c-1] + 1``.
A strand not searched (``-strand plus|minus``) is a context of length 0.

Masks (DUST and lower case, or WindowMasker's) are found on the plus strand and mirrored onto
the minus strand. With soft masking (the default) they only keep words out of the lookup table;
with hard masking the masked letters become N for every stage.
"""

import re
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

import numpy as np

from .alphabet import COMPLEMENT_BLASTNA, N_CODE, SENTINEL
from .numba_start import njit
from .options import SearchOptions
from .pools import INLINE, spread_map


@dataclass(frozen=True)
class QueryLocation:
    """The letters of a query that -query_loc has searched: [start, end), and how many the
    location asked for (its stop may lie past the query's end, where blastn stops); and the
    query's place in the input, counting the queries -query_loc left out."""

    start: int
    end: int
    asked: int
    number: int


@dataclass
class Query:
    """One query as read: id (first token of the defline), full defline, blastna codes,
    and which letters were lower case in the input; with -query_loc, the part searched."""

    id: str
    defline: str
    codes: np.ndarray       # uint8 blastna, upper-case meaning
    lowercase: np.ndarray   # bool, per letter
    location: QueryLocation | None = None
    # whether its searched letters give BLAST a Karlin-Altschul block (warned_queries)
    has_statistics: bool = True
    # whether it is in a batch none of whose queries has statistics, which blastn does not
    # search (mark_unsearched_batch): its reports then differ from a searched query's
    batch_unsearched: bool = False

    def __len__(self) -> int:
        return len(self.codes)

    @property
    def searched_length(self) -> int:
        """The letters searched: the statistics' query length."""
        return len(self) if self.location is None else self.location.end - self.location.start

    @property
    def asked_length(self) -> int:
        """The letters the search asked for, which blastn's tabular qlen, qcovs and qcovus
        count."""
        return len(self) if self.location is None else self.location.asked

    def searched(self) -> "Query":
        """The query cut to the letters searched."""
        if self.location is None:
            return self
        start, end = self.location.start, self.location.end
        return Query(self.id, self.defline, self.codes[start:end], self.lowercase[start:end])

    def __reduce__(self):
        """Pickled (a cluster search sends its queries to the workers) two letters a byte
        (blastna's codes are below 16) and a bit a lowercase flag: a quarter of the size."""
        codes = np.asarray(self.codes, dtype=np.uint8)
        even = codes if codes.size % 2 == 0 else np.append(codes, np.uint8(0))
        return (_unpickled_query, (self.id, self.defline, codes.size,
                                   (even[0::2] << 4) | even[1::2], np.packbits(self.lowercase),
                                   self.location, self.has_statistics, self.batch_unsearched))


def _unpickled_query(id: str, defline: str, length: int, pairs: np.ndarray,
                     lowercase_bits: np.ndarray, location: QueryLocation | None = None,
                     has_statistics: bool = True, batch_unsearched: bool = False) -> Query:
    codes = np.empty(pairs.size * 2, dtype=np.uint8)
    codes[0::2], codes[1::2] = pairs >> 4, pairs & 15
    lowercase = np.unpackbits(lowercase_bits, count=length).view(bool)
    return Query(id, defline, codes[:length], lowercase, location, has_statistics,
                 batch_unsearched)


def local_id(query: Query, index: int) -> str:
    """blastn's id of the query at `index` (0-based) of those searched: Query_N, N its place
    in the input, the queries -query_loc left out counted."""
    return f"Query_{index + 1 if query.location is None else query.location.number}"


# queries whose masks are found in one call to judge their statistics where masking is hard:
# one at a time, they cost more than a search of short reads spends on its own masks
MASKED_AT_ONCE = 1000


def warned_queries(read, options: SearchOptions, warn, filtered_empty: bool = False):
    """The queries read(warn) yields, each one whose searched letters give BLAST no
    Karlin-Altschul block (lacks_statistics: it has no hits) warned about to `warn` in
    blastn's words after the reader's own warnings of it, and where `filtered_empty` (the
    database's filter left no sequence) each query warned of that too; queries numbered
    from 1 in their order (-query_loc's numbers where given). Where masking is hard the
    verdict needs the masks, found for MASKED_AT_ONCE queries at a time, and the reader's
    warnings wait with their queries."""
    notice = _FilteredEmptyNotice(warn) if filtered_empty else None
    if notice is not None:
        warn = notice.warn
    if options.soft_masking:
        for index, query in enumerate(read(warn)):
            lacking = bool(query.searched_length) and lacks_statistics(query, options)
            query.has_statistics = bool(query.searched_length) and not lacking
            if lacking:
                _warn_lacking(query, index, warn)
            if notice is not None:
                notice.query_done(query, index)
            yield query
        return
    block, held, first = [], [], 0

    def hold(text: str) -> None:  # the reader's warning, as it reads block[len(block)]
        held.append((len(block), text))

    try:
        for query in read(hold):
            block.append(query)
            if len(block) == MASKED_AT_ONCE:
                yield from _judged(block, held, first, options, warn, notice)
                first += MASKED_AT_ONCE
    except BaseException:
        for _, text in held:  # what the reader said before it failed
            warn(text)
        raise
    yield from _judged(block, held, first, options, warn, notice)


def _judged(block: list, held: list, first: int, options: SearchOptions, warn,
            notice) -> list:
    """The queries of `block` (numbered from first + 1), taken out of it, after the
    warnings `held` for them and those of the ones that lack statistics, in their order."""
    searched = [query for query in block if query.searched_length]
    masks = iter(query_masks(searched, options)) if searched else iter(())
    lacking = [bool(query.searched_length) and lacks_statistics(query, options, next(masks))
               for query in block]
    said = iter(held)
    text = next(said, None)
    for k, query in enumerate(block):
        while text is not None and text[0] <= k:
            warn(text[1])
            text = next(said, None)
        query.has_statistics = bool(query.searched_length) and not lacking[k]
        if lacking[k]:
            _warn_lacking(query, first + k, warn)
        if notice is not None:
            notice.query_done(query, first + k)
    while text is not None:
        warn(text[1])
        text = next(said, None)
    queries = list(block)
    block.clear()
    held.clear()
    return queries


class _FilteredEmptyNotice:
    """blastn's sentence for a database its filter left without sequences, said of every
    query: joined to the query's own warning (no letters, no statistics) where it has one,
    else on a line of its own."""

    def __init__(self, warn):
        self._warn, self._joined = warn, False

    def warn(self, text: str) -> None:
        if text.endswith((f": {NO_DATA} ", f": {INVALID_QUERY} ")):
            text, self._joined = text + FILTERED_EMPTY + " ", True
        self._warn(text)

    def query_done(self, query: Query, index: int) -> None:
        if not self._joined:
            label = " ".join(filter(None, (local_id(query, index), query.defline)))
            self._warn(f"Warning: [blastn] {label}: {FILTERED_EMPTY} ")
        self._joined = False


def mark_unsearched_batch(batch: list) -> list:
    """The batch (a list of queries), each query marked whether blastn leaves the batch
    unsearched: none of its queries has statistics (warned_queries), so BLAST's set-up
    fails for the whole batch and its reports show blocks of -1 and no hit list."""
    unsearched = not any(query.has_statistics for query in batch)
    for query in batch:
        query.batch_unsearched = unsearched
    return batch


def _warn_lacking(query: Query, index: int, warn) -> None:
    label = " ".join(filter(None, (local_id(query, index), query.defline)))
    warn(INVALID_QUERY_WARNING.format(label=label))


def lacks_statistics(query: Query, options: SearchOptions, masks=None) -> bool:
    """Whether no context of the query has an ungapped Karlin-Altschul block: its searched
    letters, those in `masks` (its plus-strand masks, query_masks', where masking is hard)
    made N, hold none that BLAST can score (all N or other ambiguity codes, or masked
    whole)."""
    from .stats import ungapped_blocks

    letters = query.searched().codes
    if options.soft_masking and letters.size and int(letters.max()) <= _LAST_BASE:
        return _bases_lack_statistics(options.reward, options.penalty)
    if not options.soft_masking:
        letters = letters.copy()
        for start, end in np.asarray(masks, dtype=np.int64).reshape(-1, 2).tolist():
            letters[start:end] = N_CODE
    # the strands searched, each one's letter counts
    strands = [letters] * (options.strand in ("both", "plus")) + \
        [COMPLEMENT_BLASTNA[letters]] * (options.strand in ("both", "minus"))
    compositions = np.array([np.bincount(codes & 0x0F, minlength=16)[:16]
                             for codes in strands], dtype=np.int64).reshape(-1, 16)
    return all(block is None for block in
               ungapped_blocks(options.reward, options.penalty, compositions))


_LAST_BASE = 3  # blastna codes 0-3 are A, C, G, T


@lru_cache(maxsize=16)
def _bases_lack_statistics(reward: int, penalty: int) -> bool:
    """lacks_statistics of letters A, C, G and T alone: they meet the (uniform) subject
    letters' scores in the same proportions whatever their counts, so one answer holds
    for all such queries (a batch of reads asks it for each)."""
    from .stats import ungapped_blocks

    one_of_each = np.array([[1, 1, 1, 1] + [0] * 12], dtype=np.int64)  # letter counts
    return ungapped_blocks(reward, penalty, one_of_each)[0] is None


def located_queries(queries, query_loc: tuple, warn=None):
    """The queries with -query_loc's part of each to search (`query_loc`: 0-based first and
    last letters; () for all). As blastn, a query the location starts after is left out;
    one it starts just after the end of is searched without letters (no hits), warned
    about to `warn` (stderr without it), unless no query has letters left, which ends the
    search. Such queries are held back until one with letters comes, so that nothing of
    theirs is written first."""
    from .errors import InputError

    if not query_loc:
        yield from queries
        return
    first, last = query_loc
    found, held, number = False, [], 0
    for number, query in enumerate(queries, 1):
        if first > len(query):
            continue
        located = replace(query, location=QueryLocation(first, min(last + 1, len(query)),
                                                        last - first + 1, number))
        if first < len(query) and not found:
            found = True
            for empty in held:
                _warn_no_letters(empty, warn)
                yield empty
        elif first == len(query):
            if not found:  # blastn warns only where the search goes on
                held.append(located)
                continue
            _warn_no_letters(located, warn)
        yield located
    if held and not found:
        raise InputError(f"query {held[0].id}: -query_loc starts after its last letter: "
                         f"{NO_DATA}")
    if not found and number:  # an input without queries was warned about as it was read
        raise InputError("-query_loc starts after the last letter of every query: "
                         "Empty CBlastQueryVector")


def _warn_no_letters(query: Query, warn) -> None:
    from .fasta import reader_warning

    label = " ".join(filter(None, (local_id(query, 0), query.defline)))
    (warn or reader_warning)(EMPTY_QUERY_WARNING.format(label=label))


@dataclass
class QueryBatch:
    """Several queries searched together with one lookup table."""

    queries: list                 # of Query
    sequence: np.ndarray          # uint8 blastna, concatenated contexts with sentinels
    context_offset: np.ndarray    # int32 [2 * nq], start of each context in `sequence`
    context_length: np.ndarray    # int32 [2 * nq], 0 for a strand not searched
    masks: list                   # per context: int32 [k, 2] half-open masked ranges, context-relative
    lookup_segments: np.ndarray   # int32 [n, 2] unmasked half-open ranges, concatenated coordinates
    unmasked_sequence: np.ndarray  # as `sequence` but never hard-masked (for identity counts)

    @cached_property
    def query_words(self) -> tuple:
        """`sequence` as packed bases and ambiguity bits (wordrun.pack_query_words), which the
        preliminary greedy aligner compares with packed subjects."""
        from .wordrun import pack_query_words
        return pack_query_words(self.sequence)

    @cached_property
    def query_letters(self) -> tuple:
        """The queries' letters (blastna codes) back to back, and where each one starts (and
        the end): the traceback's query letters, by the queries' indices in the batch."""
        starts = np.zeros(len(self.queries) + 1, dtype=np.int64)
        np.cumsum([len(q) for q in self.queries], out=starts[1:])
        codes = np.concatenate([np.asarray(q.codes, dtype=np.uint8) for q in self.queries]) \
            if self.queries else np.zeros(0, dtype=np.uint8)
        return codes, starts

    @property
    def num_contexts(self) -> int:
        return int(self.context_offset.size)

    def context_of(self, q: int) -> int:
        """Context holding concatenated query offset q."""
        return int(np.searchsorted(self.context_offset, q, side="right") - 1)


def _masked_ranges(query: Query, dusted: np.ndarray | None, options: SearchOptions) -> np.ndarray:
    """The query's DUST intervals (inclusive ends; None without DUST) and lower-case ranges,
    as half-open ranges, merged and sorted."""
    pieces = []
    if dusted is not None and len(dusted):
        pieces.append(np.column_stack([dusted[:, 0], dusted[:, 1] + 1]))
    if options.lcase_masking and query.lowercase.any():
        pieces.append(true_ranges(query.lowercase))
    if not pieces:
        return np.zeros((0, 2), dtype=np.int32)
    return _merge(np.concatenate(pieces))


def true_ranges(flags: np.ndarray) -> np.ndarray:
    """Half-open ranges where a boolean array is true."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return np.column_stack([np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)])


def _merge(ranges: np.ndarray) -> np.ndarray:
    ranges = ranges[np.lexsort((ranges[:, 1], ranges[:, 0]))]
    merged = []
    for start, end in ranges:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return np.array(merged, dtype=np.int32).reshape(-1, 2)


@njit(cache=True, nogil=True)
def _segments_between(masked, length, base, out, count):
    """The half-open ranges of [0, length) outside the sorted `masked` ranges (a range may
    start inside an earlier, longer one), shifted by `base`, written into out[count:];
    returns the new count."""
    covered = 0
    for i in range(masked.shape[0]):
        if covered < masked[i, 0]:
            out[count, 0] = base + covered
            out[count, 1] = base + masked[i, 0]
            count += 1
        covered = max(covered, masked[i, 1])
    if covered < length:
        out[count, 0] = base + covered
        out[count, 1] = base + length
        count += 1
    return count


PARALLEL_MASK_LETTERS = 200_000  # below this, threads cost more than they save


SHARES_PER_THREAD = 2  # masking time per letter varies: more shares than threads even it out


def _all_masks(queries: list, options: SearchOptions, pool=INLINE) -> list:
    """Every query's masked ranges on the plus strand (half-open, merged and sorted), in
    query order: WindowMasker's under -window_masker_db, else DUST's and lower case's."""
    if options.window_masker_db is not None:
        return _window_masker_masks(queries, options.window_masker_db, options.strand, pool)
    if options.dust is None:
        return [_masked_ranges(q, None, options) for q in queries]
    from .dust import dust_intervals_many
    d = options.dust

    def dusted_of(codes: list) -> list:
        if options.strand != "minus":
            return dust_intervals_many(codes, d.level, d.window, d.linker)
        # blastn dusts the strand it searches: the reverse complement, its intervals placed
        # back on the plus strand (they differ where DUST's windows read the other way)
        found = dust_intervals_many([COMPLEMENT_BLASTNA[c[::-1]] for c in codes], d.level,
                                    d.window, d.linker)
        return [(len(c) - 1 - f[::-1, ::-1]).reshape(-1, 2) for c, f in zip(codes, found)]

    dusted = _intervals_on_pool(queries, pool, dusted_of)
    return [_masked_ranges(q, dusted[i], options) for i, q in enumerate(queries)]


def _window_masker_masks(queries: list, path: str, strand: str, pool) -> list:
    """WindowMasker's intervals, as half-open ranges. They are the query's only masks:
    blastn sets them in place of the DUST and lower-case masks it found before. Under
    -strand minus blastn masks the reverse complement and takes its intervals' positions as
    they are for the plus strand's, and so does this."""
    from .window_masker import unit_counts, window_masker_intervals_many
    counts = unit_counts(path)

    def masked(codes: list) -> list:
        if strand == "minus":
            codes = [COMPLEMENT_BLASTNA[c[::-1]] for c in codes]
        return window_masker_intervals_many(codes, counts)

    found = _intervals_on_pool(queries, pool, masked)
    return [np.column_stack([f[:, 0], f[:, 1] + 1]).astype(np.int32).reshape(-1, 2)
            for f in found]


def _intervals_on_pool(queries: list, pool, find) -> list:
    """`find`'s intervals of each query: `find` takes a list of codes arrays and runs
    without the GIL, so a large batch is split into shares of about equal letters, each
    found in one call on `pool`."""
    parts = 1
    if pool.threads > 1 and sum(len(q) for q in queries) >= PARALLEL_MASK_LETTERS:
        parts = min(SHARES_PER_THREAD * pool.threads, len(queries))
    shares = _balanced_shares([len(q) for q in queries], parts)
    found = spread_map(pool, lambda share: find([queries[i].codes for i in share]), shares)
    intervals = [None] * len(queries)
    for share, share_intervals in zip(shares, found):
        for i, inclusive in zip(share, share_intervals):
            intervals[i] = inclusive
    return intervals


def _balanced_shares(lengths: list, parts: int) -> list:
    """Indices split into at most `parts` lists of about equal total length: the longest
    first, each to the lightest share so far."""
    import heapq
    heap = [(0, k) for k in range(max(1, parts))]
    shares = [[] for _ in heap]
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        load, k = heapq.heappop(heap)
        shares[k].append(i)
        heapq.heappush(heap, (load + lengths[i], k))
    return [share for share in shares if share]


def query_masks(queries: list, options: SearchOptions, pool=INLINE) -> list:
    """The masked ranges build_batch finds for each query (its searched letters, plus
    strand): a function of the query and the options alone, so that a driver may find them
    ahead of its batches."""
    return _all_masks([query.searched() for query in queries], options, pool)


def _masks_of(queries: list, options: SearchOptions, pool, found: list | None) -> list:
    """The searched queries' plus-strand masks: those in `found` (None where not found
    yet), the others found now on `pool`."""
    if found is None:
        return _all_masks(queries, options, pool)
    missing = [i for i, mask in enumerate(found) if mask is None]
    masks = list(found)
    for i, mask in zip(missing, _all_masks([queries[i] for i in missing], options, pool)):
        masks[i] = mask
    return masks


def build_batch(queries: list, options: SearchOptions, pool=INLINE,
                masks_found: list | None = None) -> QueryBatch:
    """Concatenate the queries' contexts (the letters each one searches), find their masks
    (DUST on `pool`; those in `masks_found`, query_masks' for each query or None, are taken
    as found) and lookup segments."""
    queries = [query.searched() for query in queries]
    plus_masks = _masks_of(queries, options, pool, masks_found)
    if not queries:
        empty = np.zeros(0, dtype=np.int32)
        return QueryBatch([], np.full(1, SENTINEL, dtype=np.uint8), empty, empty, [],
                          np.zeros((0, 2), dtype=np.int32), np.full(1, SENTINEL, dtype=np.uint8))
    query_ends = np.cumsum([len(q) for q in queries], dtype=np.int64)
    mask_ends = np.cumsum([len(m) for m in plus_masks], dtype=np.int64)
    rows = np.concatenate([np.asarray(m, dtype=np.int32).reshape(-1, 2) for m in plus_masks])
    joined = np.concatenate([np.asarray(q.codes, dtype=np.uint8) for q in queries])
    sequence, unmasked, offsets, lengths, masks, counts, segments = _assemble_contexts(
        joined, query_ends, rows, mask_ends, options.strand in ("both", "plus"),
        options.strand in ("both", "minus"), not options.soft_masking, COMPLEMENT_BLASTNA)
    batch = QueryBatch(queries, sequence, offsets, lengths,
                       np.split(masks, np.cumsum(counts)[:-1]), segments, unmasked)
    batch.query_letters = (joined, np.concatenate([[0], query_ends]))  # made here already
    return batch


@njit(cache=True, nogil=True)
def _assemble_contexts(joined, query_ends, plus_masks, mask_ends, plus_on, minus_on, hard,
                       complement):
    """build_batch's concatenation in one compiled call (its Python waited for the GIL
    beside the warm-up): each query's plus strand and reverse complement between
    sentinels, the masks mirrored onto the minus strand, the lookup segments, and masked
    letters made N when masking is hard. Returns (sequence, unmasked sequence, offsets,
    lengths, masks of every context back to back, each context's mask count, segments)."""
    n_ctx = 2 * query_ends.size
    offsets = np.zeros(n_ctx, dtype=np.int32)
    lengths = np.zeros(n_ctx, dtype=np.int32)
    for c in range(n_ctx):
        q = c // 2
        if plus_on if c % 2 == 0 else minus_on:
            lengths[c] = query_ends[q] - (query_ends[q - 1] if q > 0 else 0)
        offsets[c] = 1 if c == 0 else offsets[c - 1] + lengths[c - 1] + 1
    sequence = np.full(offsets[n_ctx - 1] + lengths[n_ctx - 1] + 1, SENTINEL, dtype=np.uint8)
    masks = np.empty((2 * plus_masks.shape[0], 2), dtype=np.int32)
    counts = np.zeros(n_ctx, dtype=np.int64)
    segments = np.empty((masks.shape[0] + n_ctx, 2), dtype=np.int32)
    n_masks, n_segments = 0, 0
    for c in range(n_ctx):
        length = lengths[c]
        if length == 0:
            continue
        q = c // 2
        first_letter = query_ends[q - 1] if q > 0 else 0
        first_mask, end_mask = (mask_ends[q - 1] if q > 0 else 0), mask_ends[q]
        base = offsets[c]
        first = n_masks
        if c % 2 == 0:
            sequence[base:base + length] = joined[first_letter:first_letter + length]
            for i in range(first_mask, end_mask):
                masks[n_masks, 0] = plus_masks[i, 0]
                masks[n_masks, 1] = plus_masks[i, 1]
                n_masks += 1
        else:
            for p in range(length):
                sequence[base + p] = complement[joined[first_letter + length - 1 - p]]
            for i in range(end_mask - 1, first_mask - 1, -1):
                masks[n_masks, 0] = length - plus_masks[i, 1]
                masks[n_masks, 1] = length - plus_masks[i, 0]
                n_masks += 1
        counts[c] = n_masks - first
        n_segments = _segments_between(masks[first:n_masks], length, base, segments, n_segments)
    unmasked = sequence.copy()
    if hard:
        at = 0
        for c in range(n_ctx):
            for i in range(at, at + counts[c]):
                sequence[offsets[c] + masks[i, 0]:offsets[c] + masks[i, 1]] = N_CODE
            at += counts[c]
    return sequence, unmasked, offsets, lengths, masks[:n_masks], counts, segments[:n_segments]


def read_queries(source) -> list:
    """Every query of `source` (see iter_source_queries), in order."""
    return list(iter_source_queries(source))


def iter_source_queries(source):
    """The queries of any input the Python API takes, one at a time, in order: a FASTA path
    (str or os.PathLike, '-' for stdin), FASTA text, a Bio.SeqRecord.SeqRecord, a Query, or
    an iterable of these or of plain sequence strings (a string in an iterable is a sequence
    unless it starts with '>'). A query without an id is Query_N, N its place in the whole
    input, as blastn numbers the queries of its input."""
    number = 1
    for item, top_level in _input_items(source):
        for query in _item_queries(item, top_level, number):
            number += 1
            yield query


def _input_items(source):
    """(item, whether it is the whole input) pairs: a whole-input string is a path or FASTA
    text, while strings in an iterable are sequences (as gblastn.search has taken them)."""
    import os
    from collections.abc import Iterable

    single = isinstance(source, (str, os.PathLike, Query)) or _is_seq_record(source)
    if single or not isinstance(source, Iterable):
        yield source, True
    else:
        for item in source:
            yield item, False


def _item_queries(item, top_level: bool, number: int):
    import os
    from .errors import InputError

    if isinstance(item, Query):
        return [item]
    if _is_seq_record(item):
        return [_seq_record_query(item, number)]
    if isinstance(item, os.PathLike):
        return iter_queries(os.fspath(item), number)
    if isinstance(item, str):
        if top_level or item.lstrip().startswith(">"):
            return iter_queries(item, number)
        return [_letters_query(f"Query_{number}", "", item, number)]
    raise InputError(f"query {number}: {item!r} ({type(item).__name__}) is not a query: give "
                     "a FASTA path or text, a SeqRecord or a sequence string")


def _is_seq_record(item) -> bool:
    """Whether `item` is a Biopython SeqRecord; Biopython is not imported to find out (a
    SeqRecord exists only once its module is loaded)."""
    import sys
    module = sys.modules.get("Bio.SeqRecord")
    return module is not None and isinstance(item, module.SeqRecord)


def seq_record_title(record) -> str:
    """The defline Biopython writes for a SeqRecord in FASTA (FastaIO.FastaWriter): the
    description alone when it starts with the id, else the id and the description."""
    def clean(text):
        return str(text or "").replace("\n", " ").replace("\r", " ")

    identifier, description = clean(record.id), clean(record.description)
    if description and description.split(None, 1)[0] == identifier:
        return description
    return f"{identifier} {description}" if description else identifier


def _seq_record_query(record, number: int) -> Query:
    """A SeqRecord read as blastn reads the FASTA that Biopython writes for it."""
    defline = blast_defline(seq_record_title(record))
    query_id = defline.split(" ", 1)[0] or f"Query_{number}"
    return _letters_query(query_id, defline, str(record.seq), number)


def _letters_query(query_id: str, defline: str, text: str, number: int) -> Query:
    from .alphabet import INVALID, encode_blastna
    from .errors import InputError

    codes = encode_blastna(text)
    invalid = np.flatnonzero(codes == INVALID)
    if invalid.size:
        raise InputError(f"query {number} ({query_id}): invalid character "
                         f"{text[invalid[0]]!r} in sequence at position {invalid[0] + 1}")
    lowercase = np.frombuffer(text.encode("ascii"), dtype=np.uint8) >= ord("a")
    return Query(query_id, defline, codes, lowercase)


def iter_queries(source, first_number: int = 1, name: str | None = None, warn=None):
    """Queries of a FASTA path (or '-', or FASTA text, or a binary stream named `name` in
    messages), one at a time: memory holds one record. A bare sequence with no '>' line is
    one query, as blastn reads it; so is a record without letters (it can have no hits).
    Deflines are read as blastn reads them (blast_defline); a query without one is named
    Query_N, N its place in the search's input counted from `first_number`, as blastn names
    it. The reader's warnings go to `warn` (stderr without it)."""
    from .fasta import TITLE_WARNING, iter_records, reader_warning, title_ends_with_sequence, \
        to_blastna

    warn = warn or reader_warning
    if isinstance(source, str) and source.lstrip().startswith(">"):
        import io
        source = io.BytesIO(source.encode())
    records = iter_records(source, headerless_ok=True, header_errors="surrogateescape",
                           report_dropped=warn, blast_input=True, name=name)
    for number, record in enumerate(records, first_number):
        if title_ends_with_sequence(record.defline):
            warn(TITLE_WARNING)
        defline = blast_defline(record.defline)
        codes, lowercase = to_blastna(record)
        yield Query(defline.split(" ", 1)[0] or f"Query_{number}", defline, codes, lowercase)


_LEADING_BLANKS = " \t\v\f"
# blastn's words, to the trailing space, for a query without letters to search
NO_DATA = "Sequence contains no data"
EMPTY_QUERY_WARNING = "Warning: [blastn] {label}: " + NO_DATA + " "
# and for a query whose letters give no Karlin-Altschul block (all N, or hard-masked whole)
INVALID_QUERY = ("Could not calculate ungapped Karlin-Altschul parameters due to an invalid "
                 "query sequence or its translation. Please verify the query sequence(s) "
                 "and/or filtering options")
INVALID_QUERY_WARNING = "Warning: [blastn] {label}: " + INVALID_QUERY + " "
# and for every query where -seqidlist, its negative or a taxid list leaves no sequence of
# the database, joined to the warning above of that query where it has one
FILTERED_EMPTY = "Filtering resulted in an empty database."
_SPACES = re.compile(" {2,}")
_CONTROL = re.compile(r"[\x00-\x1f]")


def blast_defline(defline: str) -> str:
    """The defline as blastn keeps it: cut at a carriage return (which ends blastn's line),
    leading blanks dropped, then cut before the first control character (a tab included)
    after its first character, trailing spaces dropped. Bytes that are not UTF-8 pass
    through (read with surrogateescape), as blastn copies them to its output."""
    text = defline.split("\r", 1)[0].lstrip(_LEADING_BLANKS)
    control = _CONTROL.search(text, 1)
    return (text if control is None else text[:control.start()]).rstrip(" ")


def report_title(defline: str) -> str:
    """The query's defline as blastn's XML and JSON reports give it: blast_defline with
    each run of spaces made one."""
    return _SPACES.sub(" ", blast_defline(defline))


def latin1_if_not_utf8(text: str) -> str:
    """Text read with surrogateescape, all of it read as Latin-1 where its bytes are not
    UTF-8 (as blastn converts such a defline in its JSON and a subject's in its pairwise
    report)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("latin-1")
    return text
