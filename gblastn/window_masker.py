"""WindowMasker (Morgulis et al. 2006), reproducing the masks blastn 2.12 puts on a query
under -window_masker_db.

The unit counts file is one `windowmasker -mk_counts` wrote, in one of the two formats
blastn takes (`-sformat obinary` or `binary`; it refuses the text ones): the unit size U,
the counts of the genome's canonical units (a U-mer or its reverse complement, whichever is
smaller as a 2-bit number) and four thresholds, T_low, T_extend, T_threshold and T_high.
blastn builds its masker with every parameter 0, so each is the file's, and the window is
W = U + 4 letters.

A unit's score is its count, T_high for a count above T_high, and (T_low + 1) / 2 for a count
below T_low or a unit the file lacks. A window's score is the mean of its W - U + 1 units'
scores (an integer division). The windows are every W letters of A, C, G and T in order (a
window never holds another letter; lower case reads as upper case), and NCBI's CSeqMasker
walks them as `_mask_one` does: a window scoring T_threshold or more opens or extends a masked
interval to its end, one scoring at least T_extend keeps an open interval going, a lower one
closes it once the windows have passed its end. An obinary file may hold a bit array of the
units counted at least T_extend times; with it, NCBI's scan (CSeqMaskerCacheBoost) passes
over the windows holding no such unit that follow a window below T_extend holding none, and
so does this one: it saves most units' lookups, and changes no interval (such a window
scores below T_extend, as the one before it did, whatever the thresholds).

Masked intervals are 0-based and inclusive, on the plus strand of the letters searched.
"""

import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .arrays import grown
from .errors import InputError
from .numba_start import njit

WINDOW_EXTRA = 4  # blastn's window: the unit size plus this
FORMAT_REFUSAL = "Only optimized binary windowmasker stat files are supported"
_METADATA = 3      # the first word of a file with a metadata block after it
_BINARY = 0        # -sformat binary: (unit, count) pairs
_OBINARY = (1, 2)  # -sformat obinary: a hash table of the counts (2: with a bit array)


@dataclass(frozen=True)
class UnitCounts:
    """A unit counts file as blastn reads it. `ht` and `vt` are the obinary hash and value
    tables (both empty for a binary file) and `bits` its bit array (empty without one);
    `units` and `counts` the binary file's sorted pairs (empty for an obinary one)."""

    unit_size: int
    t_low: int
    t_extend: int
    t_threshold: int
    t_high: int
    key_bits: int
    offset: int
    collision_bits: int
    ht: np.ndarray
    vt: np.ndarray
    bits: np.ndarray
    units: np.ndarray
    counts: np.ndarray

    @property
    def window(self) -> int:
        return self.unit_size + WINDOW_EXTRA


def unit_counts(path: str) -> UnitCounts:
    """The counts file `path`, read once per version of the file (a search reads it for
    every query batch)."""
    try:
        stat = os.stat(path)
    except OSError:
        raise InputError(f"could not open {path}") from None
    return _read_counts(path, stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=2)
def _read_counts(path: str, size: int, mtime_ns: int) -> UnitCounts:
    if os.path.isdir(path) or size == 0:
        raise InputError(FORMAT_REFUSAL)
    try:
        # mapped: only the tables kept are copied out of a file that may be large
        data = np.memmap(path, dtype=np.uint8, mode="r")
    except OSError:
        raise InputError(f"could not open {path}") from None
    skip = _metadata_length(data)
    kind = _word(data, skip) if skip is not None else None
    if kind == _BINARY:
        return _read_binary(data, skip, path)
    if kind in _OBINARY:
        return _read_obinary(data, skip, path)
    raise InputError(FORMAT_REFUSAL)


def _word(data: np.ndarray, at: int) -> int | None:
    """The little-endian 32-bit word at `at`; None past the end."""
    if at < 0 or at + 4 > len(data):
        return None
    return int.from_bytes(bytes(data[at:at + 4]), "little")


def _metadata_length(data: np.ndarray) -> int | None:
    """The bytes before the format word: 8 and the metadata's for a file that starts with
    its metadata block, 0 for one without; None for a text file (ascii, oascii)."""
    first = _word(data, 0)
    if first == _METADATA:
        length = _word(data, 4)
        return None if length is None else 8 + length
    if first is None or first < _METADATA:
        return 0
    return None


def _corrupt(path: str, reason: str) -> InputError:
    return InputError(f"could not create a unit counts container from {path}: {reason}")


def _read_binary(data: np.ndarray, skip: int, path: str) -> UnitCounts:
    """CSeqMaskerIstatBin: format word, unit size, (unit, count) pairs, then T_low,
    T_extend, T_threshold and T_high."""
    header, trailer = 8, 16
    if len(data) < header + trailer:
        raise _corrupt(path, "wrong file size")
    unit_size = _word(data, skip + 4) & 0xFF
    if unit_size == 0 or unit_size > 16:
        raise _corrupt(path, "illegal unit size")
    pairs_length = len(data) - header - trailer - skip
    if pairs_length < 0 or pairs_length % 8:
        raise _corrupt(path, "wrong length")
    pairs = np.frombuffer(data, dtype="<u4", count=pairs_length // 4,
                          offset=skip + header).reshape(-1, 2)
    t_low, t_extend, t_threshold, t_high = np.frombuffer(
        data, dtype="<u4", count=4, offset=skip + header + pairs_length).tolist()
    empty = np.zeros(0, dtype=np.uint32)
    return UnitCounts(unit_size, t_low, t_extend, t_threshold, t_high, 0, 0, 0,
                      empty, np.zeros(0, dtype=np.uint16), empty,
                      pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64))


def _read_obinary(data: np.ndarray, skip: int, path: str) -> UnitCounts:
    """CSeqMaskerIstatOBinary: format word, unit size, the hash's value-table length M, key
    bits k, offset and collision bits, T_low, T_extend, T_threshold, T_high, (format 2) a
    flag and the bit array of the units counted at least T_extend times, the hash table
    (2**k words) and the value table (M half-words)."""
    words = [_word(data, skip + 4 * i) for i in range(10)]
    if None in words:
        raise _corrupt(path, "file too short")
    kind, unit_size, m, key_bits, offset, collision_bits = words[:6]
    t_low, t_extend, t_threshold, t_high = words[6:]
    unit_size &= 0xFF
    if unit_size == 0 or unit_size > 16:
        raise _corrupt(path, "unit size must be in [1,16]")
    if key_bits == 0 or key_bits > 2 * unit_size - 1:
        raise _corrupt(path, "hash key size must be in [1,2*unit_size - 1]")
    if offset > 32 - key_bits:
        raise _corrupt(path, "offset must by in [0,32 - hash_key_size]")
    if collision_bits == 0 or collision_bits > 32 - key_bits:
        raise _corrupt(path, "shift must be in [1, 32 - hash_key_size]")
    at = skip + 40
    bits = np.zeros(0, dtype=np.uint32)
    if kind == 2:
        flag = _word(data, at)
        at += 4
        bits_length = 4 ** unit_size // 8 if flag else 0
        if flag is None or at + bits_length > len(data):
            raise _corrupt(path, "not enough data to fill the hash table")
        bits = np.array(np.frombuffer(data, dtype="<u4", count=bits_length // 4, offset=at),
                        dtype=np.uint32)
        at += bits_length
    ht_length, vt_length = 4 << key_bits, 2 * m
    if at + ht_length > len(data):
        raise _corrupt(path, "not enough data to fill the hash table")
    if at + ht_length + vt_length > len(data):
        raise _corrupt(path, "not enough data to fill the values table")
    ht = np.frombuffer(data, dtype="<u4", count=1 << key_bits, offset=at)
    vt = np.frombuffer(data, dtype="<u2", count=m, offset=at + ht_length)
    _check_value_indices(ht, collision_bits, m, path)
    empty = np.zeros(0, dtype=np.int64)
    return UnitCounts(unit_size, t_low, t_extend, t_threshold, t_high, key_bits, offset,
                      collision_bits, ht.astype(np.uint32), vt.astype(np.uint16), bits, empty,
                      empty)


def _check_value_indices(ht: np.ndarray, collision_bits: int, m: int, path: str) -> None:
    """Every hash key's colliding units lie inside the value table (NCBI checks a key when a
    query's unit reads it; a damaged file is refused here once)."""
    listed = np.flatnonzero((ht & np.uint32((1 << collision_bits) - 1)) > 1)
    entries = ht[listed].astype(np.int64)
    collisions = entries & ((1 << collision_bits) - 1)
    bad = listed[(entries >> collision_bits) + collisions > m]
    if bad.size:
        raise _corrupt(path, f"bad index at key {bad[0]} : {ht[bad[0]]}")


def window_masker_intervals_many(sequences: list, counts: UnitCounts) -> list:
    """The masked intervals (0-based, inclusive; an (n, 2) array) of each sequence of blastna
    codes, in one compiled call."""
    if not sequences:
        return []
    ends = np.cumsum([len(codes) for codes in sequences], dtype=np.int64)
    joined = np.concatenate([np.asarray(codes, dtype=np.uint8) for codes in sequences])
    c = counts
    thresholds = np.array([c.t_low, c.t_extend, c.t_threshold, c.t_high], dtype=np.int64)
    hashing = np.array([c.key_bits, c.offset, c.collision_bits], dtype=np.int64)
    intervals, found = _mask_each(joined, ends, np.int64(c.unit_size), np.int64(c.window),
                                  thresholds, hashing, c.ht, c.vt, c.bits, c.units, c.counts)
    return np.split(intervals, np.cumsum(found)[:-1])


@njit(cache=True, nogil=True)
def _mask_each(joined, ends, unit_size, window, thresholds, hashing, ht, vt, bits, units,
               counts):
    """_mask_one of each joined[ends[i - 1]:ends[i]]: all the intervals, and each one's
    count."""
    out = np.empty((64, 2), dtype=np.int64)
    n_out = 0
    found = np.zeros(ends.size, dtype=np.int64)
    start = 0
    for i in range(ends.size):
        n_before = n_out
        out, n_out = _mask_one(joined[start:ends[i]], unit_size, window, thresholds, hashing,
                               ht, vt, bits, units, counts, out, n_out)
        found[i] = n_out - n_before
        start = ends[i]
    return out[:n_out], found


@njit(cache=True, nogil=True)
def _mask_one(codes, unit_size, window, thresholds, hashing, ht, vt, bits, units, counts, out,
              n_out):
    """CSeqMasker::DoMask with blastn's parameters: appends the intervals to out[n_out:];
    returns (out, its new count)."""
    t_low, t_extend, t_threshold, t_high = thresholds[0], thresholds[1], thresholds[2], \
        thresholds[3]
    n_units = window - unit_size + 1
    unit_mask = (np.int64(1) << (2 * unit_size)) - 1
    top_shift = 2 * (unit_size - 1)
    canonicals = np.zeros(n_units, dtype=np.int64)  # the window's units, a ring
    scores = np.zeros(n_units, dtype=np.int64)      # and their scores
    total = np.int64(0)
    unit = np.int64(0)
    reverse = np.int64(0)
    run = 0  # letters of A, C, G, T ending here
    last_listed = -1  # where the last unit in the bit array ends
    skipping = False
    start, end, closed_end = 0, 0, 0
    for at in range(codes.size):
        letter = np.int64(codes[at])
        if letter > 3:
            run = 0
            continue
        unit = ((unit << 2) & unit_mask) + letter
        reverse = (reverse >> 2) | ((3 - letter) << top_shift)
        run += 1
        if run < unit_size:
            continue
        slot = at % n_units
        canonicals[slot] = min(unit, reverse)
        if bits.size and (bits[unit >> 5] >> (unit & 31)) & 1:
            last_listed = at
        first = at - window + 1
        if skipping:
            if run < window or last_listed < first + unit_size - 1:
                continue
            skipping = False
            total = 0
            for i in range(n_units):
                scores[i] = _unit_score(canonicals[i], t_low, t_high, hashing, ht, vt, units,
                                        counts)
                total += scores[i]
        else:
            if run == unit_size:
                total = 0
                scores[:] = 0
            score = _unit_score(canonicals[slot], t_low, t_high, hashing, ht, vt, units,
                                counts)
            total += score - scores[slot]
            scores[slot] = score
            if run < window:
                continue
        mean = total // n_units
        if mean < t_extend:
            if end > start and first > closed_end:
                out = grown(out, n_out + 1)
                out[n_out, 0], out[n_out, 1] = start, end
                n_out += 1
                start, end, closed_end = 0, 0, 0
            # NCBI's scan goes past the windows after this one that hold no listed unit
            skipping = bits.size > 0 and last_listed < first + unit_size - 1
        elif mean < t_threshold:
            if end > start:
                if first > closed_end + 1:
                    out = grown(out, n_out + 1)
                    out[n_out, 0], out[n_out, 1] = start, end
                    n_out += 1
                    start, end, closed_end = 0, 0, 0
                else:
                    closed_end = at
        else:
            if end > start:
                if first > closed_end + 1:
                    out = grown(out, n_out + 1)
                    out[n_out, 0], out[n_out, 1] = start, end
                    n_out += 1
                    start = first
            else:
                start = first
            closed_end, end = at, at
    if end > start:
        out = grown(out, n_out + 1)
        out[n_out, 0], out[n_out, 1] = start, end
        n_out += 1
    return out, n_out


@njit(cache=True, nogil=True)
def _unit_score(canonical, t_low, t_high, hashing, ht, vt, units, counts):
    """A unit's score from its count: T_high above T_high, (T_low + 1) / 2 below T_low or
    when the file lacks the unit."""
    count = _count_of(canonical, hashing, ht, vt, units, counts)
    if count == 0 or count < t_low:
        return (t_low + 1) // 2
    return min(count, t_high)


@njit(cache=True, nogil=True)
def _count_of(unit, hashing, ht, vt, units, counts):
    """The count the file gives a canonical unit (0: none). An obinary file hashes the unit
    to key bits k from `offset` up and keeps the other bits beside its count: in the key's
    entry when the key has one unit (count at `collision_bits` up, 12 bits; the other bits
    from bit 24), else in the value table from the entry's index (7 bits above a 9-bit
    count). The other bits are compared as NCBI's 8-bit field holds them."""
    if ht.size == 0:
        found = np.searchsorted(units, unit)
        if found < units.size and units[found] == unit:
            return counts[found]
        return 0
    key_bits, offset, collision_bits = hashing[0], hashing[1], hashing[2]
    key = (unit >> offset) & ((np.int64(1) << key_bits) - 1)
    # a 32-bit shift by 32 shifts by nothing on the machines NCBI's code runs on
    high = unit >> ((offset + key_bits) & 31)
    rest = ((high << offset) + (unit & ((np.int64(1) << offset) - 1))) & 0xFF
    entry = np.int64(ht[key])
    collisions = entry & ((np.int64(1) << collision_bits) - 1)
    if collisions == 0:
        return 0
    if collisions == 1:
        return (entry >> collision_bits) & 0xFFF if (entry >> 24) == rest else 0
    first = entry >> collision_bits
    for i in range(first, first + collisions):
        value = np.int64(vt[i])
        if (value >> 9) == rest:
            return value & 0x1FF
    return 0
