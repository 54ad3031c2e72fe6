"""CPU scan backend (numba): scan, expand, mini-extend, s_TypeOfWord. The reference for
the backend contract described in ``gblastn.scan``.

Per chunk, as BLAST's BlastNaWordFinder does for one subject (or one piece of a long one):
the w-mer at every subject offset 0, scan_step, 2*scan_step, ... <= length - w is looked up;
each query offset it lists is extended to a W-mer by the routine BLAST would choose
(BlastChooseNaExtend), with the subject's right limit ``s_range`` = the chunk length
(without subject masks BLAST's scan range is the whole chunk, also for pieces of long
sequences; masked.py scans the ranges of a masked database); then the seed is checked with
s_TypeOfWord. A discontiguous table
(scan_discontiguous) is read at every offset through its template(s), and its hits are the
seeds themselves.

Subject: a packed 2-bit buffer, base i of a chunk at byte ``chunk_byte_offset + i // 4``,
first base in the two most significant bits. Bytes past the buffer read as 0; BLAST's
limits make such bases irrelevant.
"""

import numpy as np

from ..arrays import distinct_sorted, joined_fields
from ..layouts import EXTEND_BASEWISE, EXTEND_DIRECT, EXTEND_SMALL, EXTEND_SMALL_ONE_BYTE, \
    SEED_CHUNK, SEED_FIELDS, SEED_HIT_S, SEED_Q_OFF, SEED_S_FIRST, SEED_S_OFF, TABLE_MEGABLAST, \
    TABLE_SMALL
from ..lookup import LookupTable, chain_head, head_index, template_index
from ..numba_start import njit
from ..pools import in_turn
from ..refcounts import borrowed, prefetch_address
from ..wordrun import WORD_PAD, load_be64, packed_run_backward, packed_run_forward
from . import Seeds


def choose_extend(table: LookupTable) -> int:
    w, W, step = table.width, table.word_size, table.scan_step
    if w == W:
        return EXTEND_DIRECT
    if table.kind == TABLE_SMALL:
        if w % 4 == 0 and step % 4 == 0 and W - w <= 4:
            return EXTEND_SMALL_ONE_BYTE
        return EXTEND_SMALL
    return EXTEND_BASEWISE


def _match_tables():
    """Matching 2-bit groups of an XOR byte: from the low end (left extension) and from
    the high end (right extension), up to 4."""
    left = np.zeros(256, dtype=np.int32)
    right = np.zeros(256, dtype=np.int32)
    for x in range(256):
        n = 0
        while n < 4 and (x >> (2 * n)) & 3 == 0:
            n += 1
        left[x] = n
        n = 0
        while n < 4 and (x >> (6 - 2 * n)) & 3 == 0:
            n += 1
        right[x] = n
    return left, right


MATCH_LEFT, MATCH_RIGHT = _match_tables()


@njit(cache=True, nogil=True)
def subject_byte(packed, byte_off, k):
    i = byte_off + k
    if i < 0 or i >= packed.size:
        return 0
    return np.int64(packed[i])


@njit(cache=True, nogil=True)
def subject_base(packed, byte_off, s):
    return (subject_byte(packed, byte_off, s >> 2) >> (2 * (3 - (s & 3)))) & 3


@njit(cache=True, nogil=True)
def subject_word(packed, byte_off, s, width):
    """The ``width`` bases at chunk offset s packed as a table index."""
    k = s >> 2
    v = ((subject_byte(packed, byte_off, k) << 24) | (subject_byte(packed, byte_off, k + 1) << 16)
         | (subject_byte(packed, byte_off, k + 2) << 8) | subject_byte(packed, byte_off, k + 3))
    shift = 2 * (16 - (s & 3) - width)
    return (v >> shift) & ((1 << (2 * width)) - 1)


@njit(cache=True, nogil=True)
def query_quad(sequence, i):
    """BLAST's compressed query byte at (our) offset i: letters i..i+3, each ``code & 3``;
    letters outside the concatenation (the two outer sentinels and beyond) count as 0."""
    n = sequence.size
    v = 0
    for k in range(4):
        p = i + k
        c = 0
        if 1 <= p <= n - 2:
            c = sequence[p] & 3
        v = (v << 2) | c
    return v


@njit(cache=True, nogil=True)
def context_of(context_offset, q):
    """BSearchContextInfo: the last context starting at or before q (0 when none does)."""
    lo, hi = 0, context_offset.size
    while lo < hi - 1:
        mid = (lo + hi) // 2
        if context_offset[mid] > q:
            hi = mid
        else:
            lo = mid
    return lo


QUAD_PAD = 4  # query_quads' index of query offset 0


@njit(cache=True, nogil=True)
def query_quads(sequence):
    """query_quad at every offset from -QUAD_PAD to the query's end, at index offset +
    QUAD_PAD (BLAST's compressed_nuc_seq): the mini-extensions compare one byte a hit
    instead of packing four letters."""
    out = np.zeros(sequence.size + QUAD_PAD, dtype=np.uint8)
    for i in range(-QUAD_PAD, sequence.size):
        out[i + QUAD_PAD] = query_quad(sequence, i)
    return out


CONTEXT_BLOCK_BITS = 6  # offset_contexts keeps the context of every 64th query offset


@njit(cache=True, nogil=True)
def offset_contexts(context_offset, size):
    """context_of at every (1 << CONTEXT_BLOCK_BITS)th query offset below `size`: the
    mini-extensions' and the ungapped stage's bounds cost a load a hit (and a step for each
    context that starts in the block before the hit) instead of a binary search's
    unpredictable branches. One per offset took 4 bytes a query letter, 13 MB of a 1.6
    Mbp batch."""
    out = np.zeros((size + (1 << CONTEXT_BLOCK_BITS) - 1) >> CONTEXT_BLOCK_BITS,
                   dtype=np.int32)
    ctx = 0
    for block in range(out.size):
        q = block << CONTEXT_BLOCK_BITS
        while ctx + 1 < context_offset.size and context_offset[ctx + 1] <= q:
            ctx += 1
        out[block] = ctx
    return out


@njit(cache=True, nogil=True, inline="always")
def context_at(contexts, context_offset, q):
    """context_of(context_offset, q), from offset_contexts' array where it reaches."""
    block = q >> CONTEXT_BLOCK_BITS
    if q < 0 or block >= contexts.size:
        return context_of(context_offset, q)
    ctx = np.int64(contexts[block])
    while ctx + 1 < context_offset.size and context_offset[ctx + 1] <= q:
        ctx += 1
    return ctx


@njit(cache=True, nogil=True)
def basewise_seed(q_bases, q_ambig, s_bases, s_bytes, s_range, q_hit, s_hit, ext_to, width):
    """mini_extend's base-wise routine (s_BlastNaExtend), on addresses and integers only:
    the scan calls it for every megablast table hit. s_bases/s_bytes: the chunk's first
    byte's address and the bytes readable from it. Returns (accepted, q_seed, s_seed)."""
    left = packed_run_backward(q_bases, q_ambig, q_hit - 1, s_bases, s_hit - 1,
                               min(ext_to, s_hit))
    if left < ext_to:
        s_next = s_hit + width
        if s_next + ext_to - left > s_range:
            return False, 0, 0
        right = packed_run_forward(q_bases, q_ambig, q_hit + width, s_bases, s_bytes, s_next,
                                   ext_to - left)
        if left + right < ext_to:
            return False, 0, 0
    return True, q_hit - left, s_hit - left


@njit(cache=True, nogil=True, inline="always")
def mini_extend(extend_kind, sequence, context_offset, context_length, quads, contexts, packed,
                byte_off, s_range, q_hit, s_hit, word_size, width, q_bases, q_ambig):
    """Extend a w-mer hit to a W-mer as BLAST's chosen routine does.
    Returns (accepted, q_seed, s_seed). q_bases/q_ambig: addresses of the batch's packed
    query (wordrun.pack_query_words, past its WORD_PAD), for the base-wise routine, whose
    runs are measured a machine word at a time (a query letter that is no base, as the
    sentinels between contexts, never matches, as in BLAST's letter compare)."""
    if extend_kind == EXTEND_DIRECT:
        return True, q_hit, s_hit
    ext_to = word_size - width
    if extend_kind == EXTEND_BASEWISE:
        return basewise_seed(q_bases, q_ambig, packed.ctypes.data + byte_off,
                             packed.size - byte_off, s_range, q_hit, s_hit, ext_to, width)
    ctx = context_at(contexts, context_offset, q_hit)
    q_start = context_offset[ctx]
    q_range = q_start + context_length[ctx]
    if extend_kind == EXTEND_SMALL_ONE_BYTE:
        left = 0
        # BLAST: s_offset > 0 && q_offset > 0 (its q_offset is ours - 1)
        if s_hit > 0 and q_hit > 1:
            x = quads[q_hit - 4 + QUAD_PAD] ^ subject_byte(packed, byte_off, (s_hit >> 2) - 1)
            left = min(min(MATCH_LEFT[x], ext_to), q_hit - q_start)
        # BLAST: q_offset + w < query->length, i.e. ours q + w < len(sequence) - 1
        if left < ext_to and q_hit + width < sequence.size - 1:
            x = quads[q_hit + width + QUAD_PAD] ^ subject_byte(packed, byte_off,
                                                              (s_hit + width) >> 2)
            right = min(min(MATCH_RIGHT[x], s_range - (s_hit + width)), q_range - (q_hit + width))
            if left + right < ext_to:
                return False, 0, 0
        return True, q_hit - left, s_hit - left
    # EXTEND_SMALL: whole bytes, starting at the first byte boundary right of the hit start
    ext_max = min(min(ext_to, s_hit), q_hit - q_start)
    rsdl = 4 - (s_hit & 3)
    s0 = s_hit + rsdl
    q0 = q_hit + rsdl
    ext_max += rsdl
    left = 0
    s_pos, q_pos = s0, q0
    while left < ext_max:
        x = quads[q_pos - 4 + QUAD_PAD] ^ subject_byte(packed, byte_off, (s_pos >> 2) - 1)
        bases = MATCH_LEFT[x]
        left += bases
        if bases < 4:
            break
        q_pos -= 4
        s_pos -= 4
    left = min(left, ext_max)
    ext_max = min(min(word_size - left, s_range - s0), q_range - q0)
    right = 0
    s_pos, q_pos = s0, q0
    while right < ext_max:
        x = quads[q_pos + QUAD_PAD] ^ subject_byte(packed, byte_off, s_pos >> 2)
        bases = MATCH_RIGHT[x]
        right += bases
        if bases < 4:
            break
        q_pos += 4
        s_pos += 4
    right = min(right, ext_max)
    if left + right < word_size:
        return False, 0, 0
    return True, q0 - left, s0 - left


@njit(cache=True, nogil=True, inline="always")
def listed_at(listed, q_bases, word, q, width):
    """Whether the table lists query offset q under `word` (s_SmallNaLookup, s_MBLookup,
    s_NaLookup): LookupTable.listed_offsets' bit q, and the query's w-mer at q (from its
    packed bases at q_bases) equal to `word`."""
    if q < 0 or (q >> 3) >= listed.size or (listed[q >> 3] >> (q & 7)) & 1 == 0:
        return False
    bits = load_be64(q_bases + (q >> 2)) >> np.uint64(64 - 2 * ((q & 3) + width))
    return np.int64(bits & np.uint64((1 << (2 * width)) - 1)) == word


@njit(cache=True, nogil=True, inline="always")
def type_of_word(check_masks, listed, q_bases, context_offset, context_length, contexts,
                 packed, byte_off, s_range, q_off, s_off, word_size, width, s_listed):
    """BLAST's s_TypeOfWord for one-hit search. Returns (accepted, q_off, s_off): the left
    end slides right to the first w-mer the table lists at that exact query offset.

    s_listed: a subject offset on the seed's diagonal whose w-mer the table is known to list
    (the scan hit the seed came from), or -1; table look-ups there, and repeats of a look-up
    that already passed, are skipped (their answer is known).

    Inlined where it is called: a call, with its arrays' reference counts, cost about
    60 ns a seed, a quarter of a masked batch's scan (docs/perf/whole-search.md)."""
    if word_size == width:
        return True, q_off, s_off
    q_end = q_off + word_size
    s_end = s_off + word_size
    s_passed = s_listed
    if check_masks:
        if s_end - width != s_listed:
            if not listed_at(listed, q_bases,
                             subject_word(packed, byte_off, s_end - width, width),
                             q_end - width, width):
                return False, 0, 0
            s_passed = s_end - width
        while s_off != s_listed:
            if listed_at(listed, q_bases, subject_word(packed, byte_off, s_off, width), q_off,
                         width):
                break
            s_off += 1
            q_off += 1
    ext_to = word_size - (q_end - q_off)
    if ext_to > 0 or check_masks:
        # the mini-extension's W-seed lies inside its context and the subject: only a seed
        # that slid right reaches past either end (and only it reads its context, a cache
        # miss a seed in a large batch's query)
        if ext_to > s_range - s_end:
            return False, 0, 0
        if ext_to > 0:
            ctx = context_at(contexts, context_offset, q_end)
            if ext_to > context_offset[ctx] + context_length[ctx] - q_end:
                return False, 0, 0
        q_end += ext_to
        s_end += ext_to
        s_pos = s_end - width
        q_pos = q_end - width
        while s_pos > s_off:
            if s_pos != s_listed and s_pos != s_passed:
                if not listed_at(listed, q_bases, subject_word(packed, byte_off, s_pos, width),
                                 q_pos, width):
                    return False, 0, 0
            s_pos -= width
            q_pos -= width
    return True, q_off, s_off


SCAN_BLOCK = 256  # scan positions whose table entries are fetched before any is extended


@njit(cache=True, nogil=True, inline="always")
def _emit(extend_kind, check_masks, listed, sequence, context_offset, context_length, quads,
          contexts, packed, byte_off, s_range, q_hit, s_hit, word_size, width, c, out, n,
          q_bases, q_ambig):
    """Mini-extension and s_TypeOfWord of one table hit; the seed, if any, goes to out[:, n].
    Returns the new seed count, or -1 when out is full. Inlined, with mini_extend, where it
    is called: a call for each table hit, with its arrays' reference counts, held a small
    table's scan at 1.7 times its time (docs/perf/whole-search.md)."""
    ok, q_seed, s_seed = mini_extend(extend_kind, sequence, context_offset, context_length,
                                     quads, contexts, packed, byte_off, s_range, q_hit, s_hit,
                                     word_size, width, q_bases, q_ambig)
    if not ok:
        return n
    ok, q_fin, s_fin = type_of_word(check_masks, listed, q_bases, context_offset,
                                    context_length, contexts, packed, byte_off, s_range,
                                    q_seed, s_seed, word_size, width, s_hit)
    if not ok:
        return n
    if n == out.shape[1]:
        return -1
    _write_seed(out, n, c, q_fin, s_fin, s_seed, s_hit)
    return n + 1


@njit(cache=True, nogil=True)
def _write_seed(out, n, c, q_off, s_off, s_first, hit_s):
    out[SEED_CHUNK, n] = c
    out[SEED_Q_OFF, n] = q_off
    out[SEED_S_OFF, n] = s_off
    out[SEED_S_FIRST, n] = s_first
    out[SEED_HIT_S, n] = hit_s


@njit(cache=True, nogil=True, inline="always")
def _prefetch_hit(q_bases, q_ambig, q_hit):
    """The query bytes basewise_seed's left extension of table hit q_hit reads (none for
    0, a chain's end), q_bases/q_ambig as it takes them: a hit's query offset lies anywhere
    in the batch, so these are mostly cache misses, overlapped when asked for ahead."""
    if q_hit != 0:
        prefetch_address(q_bases + ((q_hit - 1) >> 2) - 7)
        prefetch_address(q_ambig + ((q_hit - 1) >> 3) - 7)


@njit(cache=True, nogil=True, inline="always")
def _prefetch_link(links, link_bytes, q_bases, q_ambig, q_hit):
    """_prefetch_hit, and the chain's link after q_hit (`links`: next_pos's address, of
    `link_bytes` a link): a megablast table's chains are walked a link at a time, each link
    a cache miss in a table of the batch's size; asked for one hit ahead, the miss overlaps
    the hit before's extension (docs/perf/whole-search.md)."""
    if q_hit != 0:
        prefetch_address(links + link_bytes * q_hit)
        _prefetch_hit(q_bases, q_ambig, q_hit)


@njit(cache=True, nogil=True)
def _block_words(packed, byte_off, s, scan_step, m, width, words):
    """subject_word at the m positions s, s + scan_step, ... into words[:m]: each one
    8-byte load (big-endian) where the block's last load stays inside the buffer, as it
    does but at a buffer's end."""
    last = byte_off + ((s + (m - 1) * scan_step) >> 2) + 8
    if last > packed.size:
        for i in range(m):
            words[i] = subject_word(packed, byte_off, s + i * scan_step, width)
        return
    base = packed.ctypes.data + byte_off
    mask = np.uint64((1 << (2 * width)) - 1)
    for i in range(m):
        p = s + i * scan_step
        bits = load_be64(base + (p >> 2)) >> np.uint64(64 - 2 * ((p & 3) + width))
        words[i] = np.int64(bits & mask)


@njit(cache=True, nogil=True)
def scan_into(kind, extend_kind, check_masks, word_size, width, scan_step,
              backbone, overflow, chain_heads, present, present_rank, next_pos, cell_start,
              offsets, sequence, context_offset, context_length, listed, quads, contexts,
              query_bases, query_ambig, packed, chunk_byte_offset, chunk_length, first_chunk,
              first_s, last_chunk, out, n):
    """Seeds from position first_s of chunk first_chunk up to chunk last_chunk, in BLAST's
    order, written to out[:, n:] (rows: chunk, q_off, s_off, s_first, hit_s).

    Returns (n, c, s): c == last_chunk when done; otherwise out filled up and the scan
    stopped before subject position s of chunk c, none of whose seeds were kept.

    The table entries of SCAN_BLOCK scan positions are read in one pass before any of them
    is extended: the loads are independent, so their cache misses overlap (the megablast
    table of a large query is far bigger than the caches)."""
    backbone, overflow, next_pos = borrowed(backbone), borrowed(overflow), borrowed(next_pos)
    chain_heads, present = borrowed(chain_heads), borrowed(present)
    present_rank, cell_start = borrowed(present_rank), borrowed(cell_start)
    offsets = borrowed(offsets)
    sequence, context_offset = borrowed(sequence), borrowed(context_offset)
    context_length, packed, out = borrowed(context_length), borrowed(packed), borrowed(out)
    listed, quads, contexts = borrowed(listed), borrowed(quads), borrowed(contexts)
    words = np.zeros(SCAN_BLOCK, dtype=np.int64)
    heads = np.zeros(SCAN_BLOCK, dtype=np.int64)
    follow = np.zeros(SCAN_BLOCK, dtype=np.int64)
    hit_at = np.zeros(SCAN_BLOCK, dtype=np.int64)  # megablast: positions of words present
    q_bases = query_bases.ctypes.data + WORD_PAD
    q_ambig = query_ambig.ctypes.data + WORD_PAD
    links, link_bytes = next_pos.ctypes.data, next_pos.itemsize  # for prefetches
    for c in range(first_chunk, last_chunk):
        byte_off = chunk_byte_offset[c]
        s_bases, s_bytes = packed.ctypes.data + byte_off, packed.size - byte_off
        length = np.int64(chunk_length[c])
        s_range = length
        s = np.int64(first_s) if c == first_chunk else np.int64(0)
        while s <= length - width:
            m = min(SCAN_BLOCK, (length - width - s) // scan_step + 1)
            # pass 1: the block's words, then the first table entry of each (and, for
            # megablast, the chain link after it); 0 / -1 where the word has none. Each
            # kind's loop apart: one loop over every kind keeps the others' registers live
            _block_words(packed, byte_off, s, scan_step, m, width, words)
            if kind == TABLE_SMALL:
                for i in range(m):
                    heads[i] = backbone[words[i]]
            elif kind == TABLE_MEGABLAST:
                # the positions of words present, gathered without a branch, then their
                # chains' heads in a loop of their own: a head is a cache miss in a large
                # table, and only a loop of nothing but such loads keeps many in flight
                k = 0
                for i in range(m):
                    word = words[i]
                    hit_at[k] = i
                    k += np.int64((present[word >> 5] >> (word & 31)) & 1)
                for j in range(k):
                    heads[j] = chain_heads[head_index(present, present_rank, words[hit_at[j]])]
                for j in range(k):
                    h = heads[j]
                    follow[j] = next_pos[h] if h != 0 else 0
                if word_size != width:
                    for j in range(k):
                        _prefetch_hit(q_bases, q_ambig, heads[j])
                        _prefetch_link(links, link_bytes, q_bases, q_ambig, follow[j])
            else:
                for i in range(m):
                    word = words[i]
                    heads[i] = word if (present[word >> 5] >> (word & 31)) & 1 else -1
            # pass 2: every query offset of each position, in table order
            if kind == TABLE_MEGABLAST and word_size == width:
                # a hit is the seed (s_BlastNaExtendDirect; s_TypeOfWord has nothing to
                # check): written here, sparing a call with every table per hit
                for j in range(k):
                    s_hit = s + hit_at[j] * scan_step
                    n0 = n
                    q_hit = heads[j]
                    nxt = follow[j]
                    while q_hit != 0:
                        if n == out.shape[1]:
                            return n0, c, s_hit
                        _write_seed(out, n, c, q_hit, s_hit, s_hit, s_hit)
                        n += 1
                        q_hit = nxt
                        if q_hit != 0:
                            nxt = next_pos[q_hit]
            elif kind == TABLE_MEGABLAST:
                # the base-wise extension of every hit takes no table; only a seed that
                # passes it calls s_TypeOfWord with the tables, and only with masks
                for j in range(k):
                    s_hit = s + hit_at[j] * scan_step
                    n0 = n
                    q_hit = heads[j]
                    nxt = follow[j]
                    while q_hit != 0:
                        _prefetch_link(links, link_bytes, q_bases, q_ambig, nxt)
                        ok, q_seed, s_seed = basewise_seed(q_bases, q_ambig, s_bases, s_bytes,
                                                           s_range, q_hit, s_hit,
                                                           word_size - width, width)
                        q_fin, s_fin = q_seed, s_seed
                        if ok and check_masks:
                            ok, q_fin, s_fin = type_of_word(
                                check_masks, listed, q_bases, context_offset, context_length,
                                contexts, packed, byte_off, s_range, q_seed, s_seed,
                                word_size, width, s_hit)
                        if ok:
                            if n == out.shape[1]:
                                return n0, c, s_hit
                            _write_seed(out, n, c, q_fin, s_fin, s_seed, s_hit)
                            n += 1
                        q_hit = nxt
                        if q_hit != 0:
                            nxt = next_pos[q_hit]
            elif kind == TABLE_SMALL:
                for i in range(m):
                    s_hit = s + i * scan_step
                    n0 = n
                    v = heads[i]
                    if v >= 0:
                        n = _emit(extend_kind, check_masks, listed, sequence, context_offset,
                                  context_length, quads, contexts, packed, byte_off, s_range,
                                  v, s_hit, word_size, width, c, out, n, q_bases, q_ambig)
                        if n < 0:
                            return n0, c, s_hit
                    elif v < -1:
                        k = -v
                        while overflow[k] >= 0:
                            n = _emit(extend_kind, check_masks, listed, sequence,
                                      context_offset, context_length, quads, contexts, packed,
                                      byte_off, s_range, np.int64(overflow[k]), s_hit,
                                      word_size, width, c, out, n, q_bases, q_ambig)
                            if n < 0:
                                return n0, c, s_hit
                            k += 1
            else:
                for i in range(m):
                    s_hit = s + i * scan_step
                    n0 = n
                    word = heads[i]
                    if word >= 0:
                        for j in range(cell_start[word], cell_start[word + 1]):
                            n = _emit(extend_kind, check_masks, listed, sequence,
                                      context_offset, context_length, quads, contexts, packed,
                                      byte_off, s_range, np.int64(offsets[j]), s_hit,
                                      word_size, width, c, out, n, q_bases, q_ambig)
                            if n < 0:
                                return n0, c, s_hit
            s += m * scan_step
    return n, last_chunk, 0


@njit(cache=True, nogil=True)
def scan_chunks(kind, extend_kind, check_masks, word_size, width, scan_step,
                backbone, overflow, chain_heads, present, present_rank, next_pos, cell_start,
                offsets, sequence, context_offset, context_length, listed, quads, contexts,
                query_bases, query_ambig, packed, chunk_byte_offset, chunk_length, first_chunk,
                last_chunk):
    """Seeds of chunks [first_chunk, last_chunk), in BLAST's order: (chunk, q_off, s_off,
    s_first, hit_s) arrays."""
    out = np.empty((SEED_FIELDS, 4096), dtype=np.int32)
    n, c, s = 0, first_chunk, 0
    while True:
        n, c, s = scan_into(kind, extend_kind, check_masks, word_size, width, scan_step,
                            backbone, overflow, chain_heads, present, present_rank, next_pos,
                            cell_start, offsets, sequence, context_offset, context_length,
                            listed, quads, contexts, query_bases, query_ambig, packed,
                            chunk_byte_offset, chunk_length, c, s, last_chunk, out, n)
        if c == last_chunk:
            break
        out = _doubled(out, n)
    return (out[SEED_CHUNK, :n].copy(), out[SEED_Q_OFF, :n].copy(), out[SEED_S_OFF, :n].copy(),
            out[SEED_S_FIRST, :n].copy(), out[SEED_HIT_S, :n].copy())


@njit(cache=True, nogil=True, inline="always")
def _chain_seeds(head, next_pos, c, s, out, n):
    """The query offsets of one megablast chain as seeds at subject offset s (q_off, s_off,
    s_first and hit_s alike: discontiguous words need no mini-extension), into out[:, n:].
    Returns the new count, or -1 when out filled up first (the caller grows it and asks
    again)."""
    q = head
    while q != 0:
        if n == out.shape[1]:
            return -1
        out[SEED_CHUNK, n] = c
        out[SEED_Q_OFF, n] = q
        out[SEED_S_OFF, n] = s
        out[SEED_S_FIRST, n] = s
        out[SEED_HIT_S, n] = s
        n += 1
        q = next_pos[q]
    return n


@njit(cache=True, nogil=True)
def _doubled(out, n):
    """A seed buffer of twice out's columns holding its first n."""
    bigger = np.empty((SEED_FIELDS, 2 * out.shape[1]), dtype=np.int32)
    bigger[:, :n] = out[:, :n]
    return bigger


@njit(cache=True, nogil=True)
def scan_discontiguous(length, shifts, masks, next_pos, heads, present, present_rank,
                       next_pos2, heads2, present2, present_rank2, packed, chunk_byte_offset,
                       chunk_length, first_chunk, last_chunk):
    """Seeds of chunks [first_chunk, last_chunk) against a discontiguous table, in BLAST's
    order (s_MB_DiscWordScanSubject_*): every subject offset from 0 to the chunk's length -
    `length`, each window read through the first template, then the second; a chain lists
    decreasing query offsets. Returns scan_chunks' arrays."""
    out = np.empty((SEED_FIELDS, 4096), dtype=np.int32)
    n = 0
    for c in range(first_chunk, last_chunk):
        out, n = discontiguous_range_grown(length, shifts, masks, next_pos, heads, present,
                                           present_rank, next_pos2, heads2, present2,
                                           present_rank2, packed, chunk_byte_offset[c], c, 0,
                                           chunk_length[c], out, n)
    return (out[SEED_CHUNK, :n].copy(), out[SEED_Q_OFF, :n].copy(), out[SEED_S_OFF, :n].copy(),
            out[SEED_S_FIRST, :n].copy(), out[SEED_HIT_S, :n].copy())


@njit(cache=True, nogil=True)
def discontiguous_range_grown(length, shifts, masks, next_pos, heads, present, present_rank,
                              next_pos2, heads2, present2, present_rank2, packed, byte_off, c,
                              left, right, out, n):
    """scan_discontiguous_range's seeds of the whole range, `out` grown as it fills:
    returns (out, n)."""
    s = np.int64(left)
    while s >= 0:
        n, s = scan_discontiguous_range(length, shifts, masks, next_pos, heads, present,
                                        present_rank, next_pos2, heads2, present2,
                                        present_rank2, packed, byte_off, c, s, right, out, n)
        if s >= 0:
            out = _doubled(out, n)
    return out, n


@njit(cache=True, nogil=True)
def scan_discontiguous_into(length, shifts, masks, next_pos, heads, present, present_rank,
                            next_pos2, heads2, present2, present_rank2, packed,
                            chunk_byte_offset, chunk_length, first_chunk, first_s, last_chunk,
                            out, n):
    """scan_into for a discontiguous table: the seeds from window start first_s of chunk
    first_chunk up to chunk last_chunk, written to out[:, n:]; returns (n, c, s), c ==
    last_chunk when done, else out filled up before window s of chunk c."""
    for c in range(first_chunk, last_chunk):
        n, s = scan_discontiguous_range(length, shifts, masks, next_pos, heads, present,
                                        present_rank, next_pos2, heads2, present2,
                                        present_rank2, packed, chunk_byte_offset[c], c,
                                        first_s if c == first_chunk else 0, chunk_length[c],
                                        out, n)
        if s >= 0:
            return n, c, s
    return n, last_chunk, 0


@njit(cache=True, nogil=True)
def scan_discontiguous_range(length, shifts, masks, next_pos, heads, present, present_rank,
                             next_pos2, heads2, present2, present_rank2, packed, byte_off, c,
                             left, right, out, n):
    """The seeds of chunk c's windows that start in [left, right - length], written to
    out[:, n:]: returns (n, -1), or (n, s) when out filled up at window s, none of whose
    seeds were kept."""
    window_mask = (np.int64(1) << (2 * length)) - 1
    # views without reference counts: the per-position helpers below take them (inlined
    # or not, a counted array costs two atomic operations a call)
    shifts, masks, packed = borrowed(shifts), borrowed(masks), borrowed(packed)
    next_pos, heads, present = borrowed(next_pos), borrowed(heads), borrowed(present)
    next_pos2, heads2, present2 = borrowed(next_pos2), borrowed(heads2), borrowed(present2)
    present_rank, present_rank2 = borrowed(present_rank), borrowed(present_rank2)
    out = borrowed(out)
    n = np.int64(n)
    left = np.int64(left)
    window = np.int64(0)
    for p in range(left, left + length - 1):
        window = (window << 2) | subject_base(packed, byte_off, p)
    for s in range(left, np.int64(right) - length + 1):
        window = ((window << 2) | subject_base(packed, byte_off, s + length - 1)) & window_mask
        first = n
        for t in range(shifts.shape[0]):
            index = template_index(window, shifts, masks, t)
            if t == 0:
                head, links = chain_head(heads, present, present_rank, index), next_pos
            else:
                head, links = chain_head(heads2, present2, present_rank2, index), next_pos2
            if head != 0:
                n = _chain_seeds(head, links, c, s, out, n)
                if n < 0:
                    return np.int64(first), np.int64(s)
    return np.int64(n), np.int64(-1)


def _scan_function(table: LookupTable):
    """The compiled scan of a table's chunks and its table arguments: scan_discontiguous for
    discontiguous words, else scan_chunks."""
    if table.template_length:
        return scan_discontiguous, discontiguous_args(table)
    return scan_chunks, _table_args(table)


def discontiguous_args(table: LookupTable) -> tuple:
    """The table arguments of the discontiguous scans."""
    return (table.template_length, table.template_shift, table.template_mask, table.next_pos,
            table.heads, table.present, table.present_rank, table.next_pos2, table.heads2,
            table.present2, table.present_rank2)


def _table_args(table: LookupTable) -> tuple:
    extend_kind = choose_extend(table)
    return (table.kind, extend_kind, table.check_masks, table.word_size, table.width,
            table.scan_step, table.backbone, table.overflow, table.heads, table.present,
            table.present_rank, table.next_pos, table.cell_start, table.offsets, table.sequence,
            table.context_offset, table.context_length, table.listed_offsets,
            extension_quads(table, extend_kind), table.offset_contexts, *table.query_words)


NO_QUADS = np.zeros(0, dtype=np.uint8)


def extension_quads(table: LookupTable, extend_kind: int) -> np.ndarray:
    """The table's query_quads where its mini-extension reads them (the byte-wise ones),
    else none: a byte a query letter, made once a batch."""
    if extend_kind in (EXTEND_SMALL, EXTEND_SMALL_ONE_BYTE):
        return table.query_quads
    return NO_QUADS


def _split_chunks(chunk_length: np.ndarray, parts: int) -> list:
    """Contiguous chunk ranges of about equal total length."""
    k = int(chunk_length.size)
    if parts <= 1 or k <= 1:
        return [(0, k)]
    cum = np.cumsum(chunk_length, dtype=np.int64)
    targets = cum[-1] * np.arange(1, parts) / parts
    cuts = np.searchsorted(cum, targets, side="left") + 1
    bounds = distinct_sorted(np.concatenate([[0], np.clip(cuts, 0, k), [k]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def find_seeds(table: LookupTable, packed: np.ndarray, chunk_byte_offset: np.ndarray,
               chunk_length: np.ndarray, num_threads: int = 1, spread=None) -> Seeds:
    """All seeds BLAST would hand to its diagonal stage, for every chunk (see
    ``gblastn.scan`` for the contract): in 4 * num_threads contiguous groups of chunks when
    num_threads > 1, run by `spread` (pools.on_threads; one after the other without it)."""
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    chunk_byte_offset = np.ascontiguousarray(chunk_byte_offset, dtype=np.int64)
    chunk_length = np.ascontiguousarray(chunk_length, dtype=np.int32)
    scan, args = _scan_function(table)
    ranges = _split_chunks(chunk_length, max(1, int(num_threads)) * 4 if num_threads > 1 else 1)
    parts = [None] * len(ranges)

    def run(k):
        parts[k] = scan(*args, packed, chunk_byte_offset, chunk_length, *ranges[k])

    (spread or in_turn)(run, len(ranges))
    if not parts:
        return Seeds.empty()
    return Seeds(*joined_fields(parts, SEED_FIELDS))


def find_seeds_from(table: LookupTable, packed: np.ndarray, chunk_byte_offset: np.ndarray,
                    chunk_length: np.ndarray, position: int, budget: int,
                    out: np.ndarray | None = None) -> tuple:
    """find_seeds' seeds of the chunks from subject position `position` of the first one
    (a multiple of the scan step) on, up to `budget` of them: (Seeds, stop), stop None when
    the scan reached the last chunk's end, else (chunk, position) where it stopped, none of
    that position's seeds taken, to go on from there. A position with more seeds than the
    budget is taken whole. `out`: an int32 buffer of (SEED_FIELDS, budget) to write the seeds into (the Seeds are
    views of it; the scan fills a buffer up to its size), else one is made."""
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    chunk_byte_offset = np.ascontiguousarray(chunk_byte_offset, dtype=np.int64)
    chunk_length = np.ascontiguousarray(chunk_length, dtype=np.int32)
    k = int(chunk_length.size)
    budget = max(1, int(budget))
    if out is None or out.shape != (SEED_FIELDS, budget):
        out = np.empty((SEED_FIELDS, budget), dtype=np.int32)
    if table.template_length:
        scan, args = scan_discontiguous_into, discontiguous_args(table)
    else:
        scan, args = scan_into, _table_args(table)
    while True:
        n, c, s = scan(*args, packed, chunk_byte_offset, chunk_length, 0, position, k, out, 0)
        if n > 0 or c == k:
            break
        out = np.empty((SEED_FIELDS, 2 * out.shape[1]), dtype=np.int32)
    # the rows of the buffer, whose pages past n were never written
    seeds = Seeds(out[SEED_CHUNK, :n], out[SEED_Q_OFF, :n], out[SEED_S_OFF, :n],
                  out[SEED_S_FIRST, :n], out[SEED_HIT_S, :n])
    return seeds, None if c == k else (int(c), int(s))
