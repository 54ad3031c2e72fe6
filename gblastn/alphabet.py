"""Nucleotide alphabets and the scoring matrix.

Encodings (as NCBI BLAST uses them):

* **blastna**, one byte per letter, used for queries and for the traceback subject:
  A=0 C=1 G=2 T=3 R=4 Y=5 M=6 K=7 W=8 S=9 B=10 D=11 H=12 V=13 N=14, and 15 for the
  sentinel between query contexts (it scores INT4_MIN/2 against everything, so every
  extension stops there). A letter is ambiguous when its blastna code is >= 4.
* **ncbi4na**, the bit-set encoding: A=1 C=2 G=4 T=8, an ambiguity code is the OR of its
  bases, N=15, gap=0. Ambiguity runs in the database are stored in this encoding.
* **ncbi2na packed**, the database's subject encoding: four bases per byte, the first base
  in the two most significant bits, A=0 C=1 G=2 T=3. Base i of a packed buffer is
  ``(buf[i // 4] >> (2 * (3 - i % 4))) & 3``.
"""

from functools import lru_cache

import numpy as np

from .layouts import BLASTNA_LETTERS

IUPAC_LETTERS = b"ACGTRYMKWSBDHVN"
SENTINEL = 15
AMBIGUOUS_MIN = 4
N_CODE = 14

# blastna code -> ncbi4na bit set
NCBI4NA_FROM_BLASTNA = np.array([1, 2, 4, 8, 5, 10, 3, 12, 9, 6, 14, 13, 11, 7, 15, 0], dtype=np.uint8)
# ncbi4na bit set -> blastna code (gap, 0, reads as N as makeblastdb stores it)
BLASTNA_FROM_NCBI4NA = np.empty(16, dtype=np.uint8)
BLASTNA_FROM_NCBI4NA[NCBI4NA_FROM_BLASTNA[:15]] = np.arange(15, dtype=np.uint8)
BLASTNA_FROM_NCBI4NA[0] = N_CODE

# blastna code -> IUPAC letter; the sentinel prints as '-'
IUPAC_FROM_BLASTNA = np.frombuffer(IUPAC_LETTERS + b"-", dtype=np.uint8).copy()

INVALID = 255


def _ascii_to_blastna() -> np.ndarray:
    table = np.full(256, INVALID, dtype=np.uint8)
    for code, letter in enumerate(IUPAC_LETTERS):
        table[letter] = code
        table[ord(chr(letter).lower())] = code
    table[ord("U")] = table[ord("u")] = 3  # RNA reads as DNA
    table[ord("-")] = N_CODE  # a gap reads as N, as makeblastdb stores it
    return table


# ASCII byte -> blastna code; INVALID for anything that is not an IUPAC nucleotide letter
BLASTNA_FROM_ASCII = _ascii_to_blastna()


def _complement() -> np.ndarray:
    bits = NCBI4NA_FROM_BLASTNA[:15]
    # swapping A<->T and C<->G on the bit set is reversing its four bits
    swapped = ((bits & 1) << 3) | ((bits & 2) << 1) | ((bits & 4) >> 1) | ((bits & 8) >> 3)
    table = np.empty(16, dtype=np.uint8)
    table[:15] = BLASTNA_FROM_NCBI4NA[swapped]
    table[SENTINEL] = SENTINEL
    return table


# blastna code -> blastna code of the complementary letter
COMPLEMENT_BLASTNA = _complement()


def encode_blastna(text: bytes | str) -> np.ndarray:
    """IUPAC text (either case) to blastna codes; invalid letters become INVALID (255)."""
    if isinstance(text, str):
        text = text.encode("ascii", "replace")
    return BLASTNA_FROM_ASCII[np.frombuffer(text, dtype=np.uint8)]


def decode_blastna(codes: np.ndarray) -> str:
    """blastna codes to upper-case IUPAC text."""
    return IUPAC_FROM_BLASTNA[np.asarray(codes, dtype=np.uint8)].tobytes().decode("ascii")


def reverse_complement(codes: np.ndarray) -> np.ndarray:
    """Reverse complement of a blastna sequence."""
    return COMPLEMENT_BLASTNA[np.asarray(codes, dtype=np.uint8)[::-1]]


def _round_half_away(x: float) -> int:
    return int(np.floor(x + 0.5)) if x >= 0 else -int(np.floor(-x + 0.5))


SENTINEL_SCORE = -(2**31) // 2  # INT4_MIN / 2


@lru_cache(maxsize=16)
def score_matrix(reward: int, penalty: int) -> np.ndarray:
    """BLAST's 16x16 blastna scoring matrix (BlastScoreBlkNuclMatrixCreate), read-only
    (every gapped chunk asks for it).

    Letters whose base sets intersect score round(((d - 1) * penalty + reward) / d), d the
    number of bases of the more ambiguous (higher-coded) letter, rounded half away from
    zero; disjoint sets score `penalty`; the sentinel row and column score INT4_MIN/2.
    """
    bits = NCBI4NA_FROM_BLASTNA
    counts = np.array([bin(int(b)).count("1") for b in bits])
    m = np.empty((BLASTNA_LETTERS, BLASTNA_LETTERS), dtype=np.int32)
    for i in range(BLASTNA_LETTERS):
        for j in range(BLASTNA_LETTERS):
            if i == SENTINEL or j == SENTINEL:
                m[i, j] = SENTINEL_SCORE
            elif bits[i] & bits[j]:
                d = counts[max(i, j)]
                m[i, j] = _round_half_away(((d - 1) * penalty + reward) / d)
            else:
                m[i, j] = penalty
    m.flags.writeable = False
    return m


def pack_2bit(codes: np.ndarray) -> np.ndarray:
    """Pack 2-bit base codes (0..3) four to a byte, first base most significant.

    The last byte's unused low bits are zero. Returns ceil(n/4) bytes.
    """
    codes = np.asarray(codes, dtype=np.uint8)
    n = codes.size
    padded = np.zeros((n + 3) // 4 * 4, dtype=np.uint8)
    padded[:n] = codes & 3
    quads = padded.reshape(-1, 4)
    return (quads[:, 0] << 6) | (quads[:, 1] << 4) | (quads[:, 2] << 2) | quads[:, 3]


def unpack_2bit(packed: np.ndarray, length: int, start: int = 0) -> np.ndarray:
    """Bases [start, start+length) of a packed buffer as 2-bit codes (0..3)."""
    packed = np.asarray(packed, dtype=np.uint8)
    first, last = start // 4, (start + length + 3) // 4
    quads = packed[first:last]
    out = np.empty((quads.size, 4), dtype=np.uint8)
    out[:, 0] = quads >> 6
    out[:, 1] = (quads >> 4) & 3
    out[:, 2] = (quads >> 2) & 3
    out[:, 3] = quads & 3
    offset = start - first * 4
    return out.reshape(-1)[offset:offset + length]
