"""Query batch: both strands of each query as contexts, masks, and lookup segments.

Layout of the concatenated query (as BLAST's SetupQueries): a sentinel (15), context 0 (query 0
plus strand), a sentinel, context 1 (query 0 reverse complement), a sentinel, context 2, ...
and a final sentinel. ``context_offset[c]`` = ``context_offset[c-1] + context_length[c-1] + 1``.
A strand not searched (``-strand plus|minus``) is a context of length 0.

Masks (DUST, lower case) are found on the plus strand and mirrored onto the minus strand. With
soft masking (the default) they only keep words out of the lookup table; with hard masking the
masked letters become N for every stage.
"""

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .alphabet import N_CODE, SENTINEL, reverse_complement
from .options import SearchOptions


@dataclass
class Query:
    """One query as read: id (first token of the defline), full defline, blastna codes,
    and which letters were lower case in the input."""

    id: str
    defline: str
    codes: np.ndarray       # uint8 blastna, upper-case meaning
    lowercase: np.ndarray   # bool, per letter

    def __len__(self) -> int:
        return int(self.codes.size)


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

    @property
    def num_contexts(self) -> int:
        return int(self.context_offset.size)

    def context_of(self, q: int) -> int:
        """Context holding concatenated query offset q."""
        return int(np.searchsorted(self.context_offset, q, side="right") - 1)


def mask_intervals(query: Query, options: SearchOptions) -> np.ndarray:
    """Masked ranges of the plus strand, half-open, merged and sorted: DUST and lower case."""
    pieces = []
    if options.dust is not None and len(query):
        from .dust import dust_intervals
        d = options.dust
        inclusive = dust_intervals(query.codes, d.level, d.window, d.linker)
        if len(inclusive):
            pieces.append(np.column_stack([inclusive[:, 0], inclusive[:, 1] + 1]))
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


def _complement_ranges(masked: np.ndarray, length: int) -> np.ndarray:
    """The half-open ranges of [0, length) outside the sorted `masked` ranges, as [k, 2]
    int64 (a range may start inside an earlier, longer one)."""
    masked = np.asarray(masked, dtype=np.int64).reshape(-1, 2)
    covered_to = np.maximum.accumulate(np.concatenate([[0], masked[:, 1]]))
    starts = np.append(covered_to[:-1], covered_to[-1])
    ends = np.append(masked[:, 0], length)
    keep = starts < ends
    return np.column_stack([starts[keep], ends[keep]])


PARALLEL_MASK_LETTERS = 200_000  # below this, threads cost more than they save


def _all_masks(queries: list, options: SearchOptions) -> list:
    """mask_intervals of every query, in order; DUST releases the GIL, so large batches are
    masked on options.num_threads threads."""
    threads = min(int(options.num_threads), len(queries))
    if threads <= 1 or options.dust is None or \
            sum(len(q) for q in queries) < PARALLEL_MASK_LETTERS:
        return [mask_intervals(q, options) for q in queries]
    from concurrent.futures import ThreadPoolExecutor
    # the longest first, so that no thread is left with a long query at the end
    longest_first = sorted(range(len(queries)), key=lambda i: -len(queries[i]))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        masks = {i: pool.submit(mask_intervals, queries[i], options) for i in longest_first}
        return [masks[i].result() for i in range(len(queries))]


def build_batch(queries: list, options: SearchOptions) -> QueryBatch:
    """Concatenate the queries' contexts, find their masks and lookup segments."""
    n_ctx = 2 * len(queries)
    offsets = np.zeros(n_ctx, dtype=np.int32)
    lengths = np.zeros(n_ctx, dtype=np.int32)
    strands = (options.strand in ("both", "plus"), options.strand in ("both", "minus"))
    plus_masks = _all_masks(queries, options)
    for c in range(n_ctx):
        lengths[c] = len(queries[c // 2]) if strands[c % 2] else 0
        offsets[c] = 1 if c == 0 else offsets[c - 1] + lengths[c - 1] + 1
    total = int(offsets[-1] + lengths[-1] + 1) if n_ctx else 1
    sequence = np.full(total, SENTINEL, dtype=np.uint8)
    masks, segments = [], []
    for c in range(n_ctx):
        query, plus_mask = queries[c // 2], plus_masks[c // 2]
        length = len(query)
        if c % 2 == 0:
            codes, mask = query.codes, plus_mask
        else:
            codes = reverse_complement(query.codes)
            mask = np.column_stack([length - plus_mask[:, 1], length - plus_mask[:, 0]])[::-1]
        mask = np.asarray(mask, dtype=np.int32).reshape(-1, 2)
        if lengths[c] == 0:
            masks.append(np.zeros((0, 2), dtype=np.int32))
            continue
        sequence[offsets[c]:offsets[c] + length] = codes
        masks.append(mask)
        segments.append(offsets[c] + _complement_ranges(mask, length))
    unmasked = sequence.copy()
    if not options.soft_masking:
        for c in range(n_ctx):
            for a, b in masks[c]:
                sequence[offsets[c] + a:offsets[c] + b] = N_CODE
    segments = np.concatenate(segments) if segments else np.zeros((0, 2), dtype=np.int64)
    return QueryBatch(queries, sequence, offsets, lengths, masks,
                      segments.astype(np.int32).reshape(-1, 2), unmasked)


def read_queries(source) -> list:
    """Queries from a FASTA path (or '-'), FASTA text, or a list of Query / sequence strings."""
    if isinstance(source, list):
        return [_as_query(item, i) for i, item in enumerate(source)]
    return list(iter_queries(source))


def iter_queries(source):
    """Queries of a FASTA path (or '-', or FASTA text), one at a time: memory holds one record.
    A bare sequence with no '>' line is one query, as blastn reads it."""
    from .fasta import iter_records, to_blastna

    if isinstance(source, str) and source.lstrip().startswith(">"):
        import io
        source = io.BytesIO(source.encode())
    from .errors import InputError

    for record in iter_records(source, headerless_ok=True):
        if len(record) == 0:
            raise InputError(f"{record.source}:{record.line}: query {record.id or record.defline!r} "
                             "has no sequence data")
        codes, lowercase = to_blastna(record)
        yield Query(record.id, record.defline, codes, lowercase)


def _as_query(item, index: int) -> Query:
    if isinstance(item, Query):
        return item
    from .alphabet import INVALID, encode_blastna
    from .errors import InputError
    text = str(item)
    codes = encode_blastna(text)
    if (codes == INVALID).any():
        raise InputError(f"query {index + 1}: invalid character in sequence")
    lowercase = np.frombuffer(text.encode(), dtype=np.uint8) >= ord("a")
    return Query(f"Query_{index + 1}", f"Query_{index + 1}", codes, lowercase)


def read_query_list(path: str) -> list:
    """The query FASTA files a -query_list file names, one per line, relative to its folder."""
    import os
    from .errors import InputError
    try:
        with open(path, encoding="utf-8") as handle:
            lines = [line.strip() for line in handle]
    except OSError as exc:
        raise InputError(f"cannot read query list {path}: {exc.strerror}") from None
    folder = os.path.dirname(os.path.abspath(path))
    files = [os.path.join(folder, line) for line in lines if line and not line.startswith("#")]
    if not files:
        raise InputError(f"query list {path} names no files")
    return files
