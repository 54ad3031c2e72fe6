"""The scan of a soft-masked database (-db_soft_mask): only the unmasked ranges of each
chunk, as BLAST's BlastNaWordFinder scans a subject whose mask_type is set
(s_DetermineScanningOffsets, masksubj.inl).

BLAST then scans every range [left, right) with its generic scanner: the w-mer at left +
W - w, left + W - w + scan_step, ... <= right - w (a W-mer seed lies inside the range), and
extends each table hit with the range's right end as the subject limit, through
s_BlastNaExtend or s_BlastSmallNaExtend (never the aligned variants); a discontiguous table
reads every window [left, right - template length]. The seeds are those of
``gblastn.scan.cpu``, in its order (ranges in chunk order, then by position).
"""

import numpy as np

from ..arrays import distinct_sorted, joined_fields
from ..layouts import EXTEND_BASEWISE, EXTEND_DIRECT, EXTEND_SMALL, SEED_CHUNK, SEED_FIELDS, \
    SEED_HIT_S, SEED_Q_OFF, SEED_S_FIRST, SEED_S_OFF, TABLE_MEGABLAST, TABLE_SMALL
from ..lookup import LookupTable, head_index
from ..numba_start import njit
from ..pools import in_turn
from ..refcounts import borrowed
from ..wordrun import WORD_PAD
from . import Seeds
from .cpu import _doubled, _emit, discontiguous_args, discontiguous_range_grown, \
    extension_quads, subject_word


def masked_extend(table: LookupTable) -> int:
    """The W-mer extension BLAST uses on a masked subject (BlastNaWordFinder)."""
    if table.width == table.word_size:
        return EXTEND_DIRECT
    return EXTEND_SMALL if table.kind == TABLE_SMALL else EXTEND_BASEWISE


@njit(cache=True, nogil=True)
def _emit_position(kind, extend_kind, check_masks, word_size, width, backbone, overflow,
                   chain_heads, present, present_rank, next_pos, cell_start, offsets, sequence,
                   context_offset, context_length, listed, quads, contexts, packed, byte_off,
                   s_range, s_hit, c, out, n, q_bases, q_ambig):
    """The seeds of the table hits of the w-mer at s_hit, in table order, into out[:, n:].
    Returns the new count, or -1 when out filled up."""
    word = subject_word(packed, byte_off, s_hit, width)
    if kind == TABLE_SMALL:
        v = np.int64(backbone[word])
        if v >= 0:
            return _emit(extend_kind, check_masks, listed, sequence, context_offset,
                         context_length, quads, contexts, packed, byte_off, s_range, v, s_hit,
                         word_size, width, c, out, n, q_bases, q_ambig)
        k = -v
        while v < -1 and overflow[k] >= 0:
            n = _emit(extend_kind, check_masks, listed, sequence, context_offset,
                      context_length, quads, contexts, packed, byte_off, s_range,
                      np.int64(overflow[k]), s_hit, word_size, width, c, out, n, q_bases,
                      q_ambig)
            if n < 0:
                return n
            k += 1
        return n
    if (present[word >> 5] >> (word & 31)) & 1 == 0:
        return n
    if kind == TABLE_MEGABLAST:
        q_hit = np.int64(chain_heads[head_index(present, present_rank, word)])
        while q_hit != 0:
            n = _emit(extend_kind, check_masks, listed, sequence, context_offset,
                      context_length, quads, contexts, packed, byte_off, s_range, q_hit, s_hit,
                      word_size, width, c, out, n, q_bases, q_ambig)
            if n < 0:
                return n
            q_hit = np.int64(next_pos[q_hit])
        return n
    for j in range(cell_start[word], cell_start[word + 1]):
        n = _emit(extend_kind, check_masks, listed, sequence, context_offset, context_length,
                  quads, contexts, packed, byte_off, s_range, np.int64(offsets[j]), s_hit,
                  word_size, width, c, out, n, q_bases, q_ambig)
        if n < 0:
            return n
    return n


@njit(cache=True, nogil=True)
def scan_ranges(kind, extend_kind, check_masks, word_size, width, scan_step,
                backbone, overflow, chain_heads, present, present_rank, next_pos, cell_start,
                offsets, sequence, context_offset, context_length, listed, quads, contexts,
                query_bases, query_ambig, packed, chunk_byte_offset, range_chunk, range_left,
                range_right, first, last):
    """Seeds of scan ranges [first, last): range r covers [range_left[r], range_right[r])
    of chunk range_chunk[r]. Returns scan_chunks' arrays."""
    out = np.empty((SEED_FIELDS, 4096), dtype=np.int32)
    n = 0
    q_bases = query_bases.ctypes.data + WORD_PAD
    q_ambig = query_ambig.ctypes.data + WORD_PAD
    # views without reference counts for the call each position makes (a counted array
    # costs two atomic operations a call); `seeds` is made again when `out` grows
    backbone, overflow, next_pos = borrowed(backbone), borrowed(overflow), borrowed(next_pos)
    chain_heads, present = borrowed(chain_heads), borrowed(present)
    present_rank, cell_start = borrowed(present_rank), borrowed(cell_start)
    offsets, sequence = borrowed(offsets), borrowed(sequence)
    context_offset = borrowed(context_offset)
    context_length, listed, quads = borrowed(context_length), borrowed(listed), borrowed(quads)
    contexts, packed, seeds = borrowed(contexts), borrowed(packed), borrowed(out)
    for r in range(first, last):
        c = range_chunk[r]
        byte_off = chunk_byte_offset[c]
        s_range = np.int64(range_right[r])
        s = np.int64(range_left[r]) + word_size - width
        while s <= s_range - width:
            n0 = n
            n = _emit_position(kind, extend_kind, check_masks, word_size, width, backbone,
                               overflow, chain_heads, present, present_rank, next_pos,
                               cell_start, offsets, sequence, context_offset, context_length,
                               listed, quads, contexts, packed, byte_off, s_range, s, c, seeds,
                               n0, q_bases, q_ambig)
            if n < 0:  # out is full: grown, and this position's seeds made again
                out = _doubled(out, n0)
                seeds = borrowed(out)
                n = n0
                continue
            s += scan_step
    return (out[SEED_CHUNK, :n].copy(), out[SEED_Q_OFF, :n].copy(), out[SEED_S_OFF, :n].copy(),
            out[SEED_S_FIRST, :n].copy(), out[SEED_HIT_S, :n].copy())


@njit(cache=True, nogil=True)
def scan_discontiguous_ranges(length, shifts, masks, next_pos, heads, present, present_rank,
                              next_pos2, heads2, present2, present_rank2, packed,
                              chunk_byte_offset, range_chunk, range_left, range_right, first,
                              last):
    """scan_discontiguous over scan ranges [first, last): every window that starts in
    [left, right - length] of its range."""
    out = np.empty((SEED_FIELDS, 4096), dtype=np.int32)
    n = 0
    for r in range(first, last):
        c = range_chunk[r]
        out, n = discontiguous_range_grown(length, shifts, masks, next_pos, heads, present,
                                           present_rank, next_pos2, heads2, present2,
                                           present_rank2, packed, chunk_byte_offset[c], c,
                                           range_left[r], range_right[r], out, n)
    return (out[SEED_CHUNK, :n].copy(), out[SEED_Q_OFF, :n].copy(), out[SEED_S_OFF, :n].copy(),
            out[SEED_S_FIRST, :n].copy(), out[SEED_HIT_S, :n].copy())


def find_masked_seeds(table: LookupTable, packed: np.ndarray, chunk_byte_offset: np.ndarray,
                      ranges, num_threads: int = 1, spread=None) -> Seeds:
    """find_seeds for the scan ranges of the chunks (engine.ScanRanges), in 4 * num_threads
    contiguous groups of ranges when num_threads > 1, run by `spread`."""
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    chunk_byte_offset = np.ascontiguousarray(chunk_byte_offset, dtype=np.int64)
    chunk = np.repeat(np.arange(ranges.first.size - 1, dtype=np.int32), np.diff(ranges.first))
    if table.template_length:
        scan = scan_discontiguous_ranges
        args = discontiguous_args(table)
    else:
        scan = scan_ranges
        extend_kind = masked_extend(table)
        args = (table.kind, extend_kind, table.check_masks, table.word_size,
                table.width, table.scan_step, table.backbone, table.overflow, table.heads,
                table.present, table.present_rank, table.next_pos, table.cell_start,
                table.offsets, table.sequence, table.context_offset, table.context_length,
                table.listed_offsets, extension_quads(table, extend_kind), table.offset_contexts,
                *table.query_words)
    total = int(chunk.size)
    groups = max(1, int(num_threads)) * 4 if num_threads > 1 else 1
    bounds = distinct_sorted(np.linspace(0, total, groups + 1).astype(np.int64))
    parts = [None] * max(1, len(bounds) - 1)

    def run(k):
        lo, hi = (int(bounds[k]), int(bounds[k + 1])) if len(bounds) > 1 else (0, 0)
        parts[k] = scan(*args, packed, chunk_byte_offset, chunk, ranges.left, ranges.right,
                        lo, hi)

    (spread or in_turn)(run, len(parts))
    fields = joined_fields(parts, SEED_FIELDS)
    return Seeds(*fields)
