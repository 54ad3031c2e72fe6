"""One sequence's letters to the database's stored form: 2-bit bases with makeblastdb's
substitutes at ambiguous positions, plus the ambiguity runs that restore the true letters.

`SequenceEncoder` takes the letters in pieces as the FASTA reader gives them and packs each
piece at once, so a sequence costs its packed bytes (a quarter of its letters) and its runs,
never its letters whole. The substitutes are drawn at the end: CRandom is seeded with the
sequence's length, known only then.

Runs are maximal stretches of one ncbi4na code (not split at 4096 as BLAST's file format must);
offsets and lengths are in bases. A '-' (gap) is stored as N, as makeblastdb does.
"""

from array import array
from typing import NamedTuple

import numpy as np

from ..alphabet import BLASTNA_FROM_ASCII, INVALID, NCBI4NA_FROM_BLASTNA
from .crandom import BLOCK_DRAWS, SeededDraws, substitute_bases

UNAMBIGUOUS_LETTERS = b"ACGTUacgtu"


def _ascii_to_ncbi4na() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint8)  # 0 marks a byte that is not a letter
    valid = BLASTNA_FROM_ASCII != INVALID
    table[valid] = NCBI4NA_FROM_BLASTNA[BLASTNA_FROM_ASCII[valid]]
    return table


def _letter_pair_table() -> np.ndarray:
    """Two letters (read as one little-endian uint16) -> their two 2-bit bases, first base
    high; an ambiguous letter packs as 0 until its substitute is drawn."""
    two_bit = np.zeros(256, dtype=np.uint8)
    for letter, base in zip(UNAMBIGUOUS_LETTERS, [0, 1, 2, 3, 3] * 2):
        two_bit[letter] = base
    pair = np.arange(1 << 16)
    return ((two_bit[pair & 0xFF] << 2) | two_bit[pair >> 8]).astype(np.uint8)


def _run_key_table() -> np.ndarray:
    """Letter -> 0 for a base, 16 | its ncbi4na code for an ambiguous letter."""
    key = _ascii_to_ncbi4na() | np.uint8(16)
    key[np.frombuffer(UNAMBIGUOUS_LETTERS, dtype=np.uint8)] = 0
    return key


NCBI4NA_FROM_ASCII = _ascii_to_ncbi4na()
_PAIR_BASES = _letter_pair_table()
_RUN_KEY = _run_key_table()


class EncodedSequence(NamedTuple):
    packed: bytearray       # ceil(length / 4) bytes, first base in the high bits
    length: int
    amb_offset: np.ndarray  # int64 [runs]
    amb_length: np.ndarray  # int64 [runs]
    amb_code: np.ndarray    # uint8 [runs], ncbi4na


def _pack(letters: np.ndarray) -> np.ndarray:
    """Letters (a multiple of four, validated) packed four to a byte."""
    pairs = _PAIR_BASES[letters.view("<u2")]
    packed = pairs[0::2] << 4
    packed |= pairs[1::2]
    return packed


class SequenceEncoder:
    """Packs one sequence from its pieces of validated ASCII letters (`add`); `finish` draws
    the substitutes and returns the EncodedSequence."""

    def __init__(self):
        self.packed = bytearray()
        self.length = 0
        self._unpacked = b""  # the last 1-3 letters, until a fourth fills their byte
        self._offsets = array("q")
        self._lengths = array("q")
        self._codes = array("B")

    def add(self, letters: bytes) -> None:
        if letters.translate(None, UNAMBIGUOUS_LETTERS):
            self._add_runs(np.frombuffer(letters, dtype=np.uint8), self.length)
        self.length += len(letters)
        if self._unpacked:
            letters = self._unpacked + letters
        whole = len(letters) & ~3
        if whole:
            self.packed += _pack(np.frombuffer(letters, dtype=np.uint8, count=whole)).data
        self._unpacked = letters[whole:]

    def _add_runs(self, letters: np.ndarray, offset: int) -> None:
        """The ambiguity runs of one piece starting at `offset`, the first one joined to
        the last run so far when it goes on from it."""
        key = np.zeros(letters.size + 2, dtype=np.uint8)
        key[1:-1] = _RUN_KEY[letters]
        edges = np.flatnonzero(key[1:] != key[:-1])  # where each stretch of one key starts
        ambiguous = key[edges[:-1] + 1] != 0
        starts, ends = edges[:-1][ambiguous], edges[1:][ambiguous]
        codes = key[starts + 1] & 15
        if self._codes and self._offsets[-1] + self._lengths[-1] == offset + int(starts[0]) \
                and self._codes[-1] == codes[0]:
            self._lengths[-1] += int(ends[0] - starts[0])
            starts, ends, codes = starts[1:], ends[1:], codes[1:]
        self._offsets.frombytes((starts + offset).tobytes())
        self._lengths.frombytes((ends - starts).tobytes())
        self._codes.frombytes(codes.tobytes())

    def finish(self) -> EncodedSequence:
        if self._unpacked:
            self.packed += _pack(np.frombuffer(self._unpacked.ljust(4, b"A"), dtype=np.uint8)).data
            self._unpacked = b""
        offsets = np.frombuffer(self._offsets, dtype=np.int64)
        lengths = np.frombuffer(self._lengths, dtype=np.int64)
        codes = np.frombuffer(self._codes, dtype=np.uint8)
        if codes.size:
            _substitute(np.frombuffer(self.packed, dtype=np.uint8), self.length, offsets,
                        lengths, codes)
        return EncodedSequence(self.packed, self.length, offsets, lengths, codes)


def _substitute(packed: np.ndarray, length: int, offsets: np.ndarray, lengths: np.ndarray,
                codes: np.ndarray) -> None:
    """makeblastdb's substitutes, drawn from CRandom(length) in sequence order, packed at
    the ambiguous positions (where the bases are still 0)."""
    draws = SeededDraws(length)
    for positions, position_codes in _ambiguous_positions(offsets, lengths, codes):
        bases = substitute_bases(position_codes, draws.take(positions.size))
        shifted = (bases << (6 - 2 * (positions & 3))).astype(np.uint8)
        np.bitwise_or.at(packed, positions >> 2, shifted)


def _ambiguous_positions(offsets, lengths, codes):
    """(positions, codes) of every ambiguous letter in order, in blocks of BLOCK_DRAWS: the
    runs' letters in memory a block at a time, however long the runs."""
    ends = np.cumsum(lengths)
    starts = ends - lengths
    for first in range(0, int(ends[-1]), BLOCK_DRAWS):
        index = np.arange(first, min(first + BLOCK_DRAWS, int(ends[-1])), dtype=np.int64)
        run = np.searchsorted(ends, index, side="right")
        yield offsets[run] + (index - starts[run]), codes[run]
