"""Exact-match runs measured a machine word at a time, for the greedy aligner's inner loop.

The greedy aligner asks, for every live diagonal at every distance, how many letters match
from a cell on: most answers are a handful of letters, the one on the alignment's path is
long. Comparing a letter at a time costs a load, an extraction and a hard-to-predict branch
per letter; here one 64-bit load per side covers up to 28 packed bases or 8 blastna letters,
and the first difference is found with a bit count.

The run functions take raw addresses and plain integers, never arrays: a numba call that
passes arrays counts references on them, and those atomic counts on the shared query and
subject made the aligner both slow and unable to scale over threads.

Layouts:

* packed bases (2 bits each, the first base of a byte in its high bits) as the database
  stores subjects, and as `pack_query_words` stores a query batch;
* query ambiguity bits (1 bit per letter, the first letter of a byte in its high bit): set
  where the blastna letter is not A, C, G or T, since such a letter never matches;
* blastna letters, one per byte (traceback: the true letters of both sequences).

`pack_query_words` leaves WORD_PAD zero bytes on both sides of its arrays, so a word load
near either end of the batch stays inside them; a subject word load is made only when all
its bytes lie inside the subject array, and letter-at-a-time code covers the rest.
"""

import numpy as np

from .layouts import PACKED_STEP
from .numba_start import intrinsic, njit

WORD_PAD = 8          # zero bytes around the packed query arrays
AMBIGUOUS_BYTES = 0xFCFCFCFCFCFCFCFC  # a blastna letter with one of these bits is no base


# ----------------------------------------------------------------------------------------------
# machine words


@intrinsic
def _load_u64(typingctx, address):
    """The 8 bytes at `address` (any alignment) as a native (little-endian) integer."""
    from llvmlite import ir
    from numba import types

    sig = types.uint64(types.intp)

    def codegen(context, builder, signature, args):
        pointer = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load(pointer, align=1)

    return sig, codegen


@intrinsic
def _load_u8(typingctx, address):
    """The byte at `address`."""
    from llvmlite import ir
    from numba import types

    sig = types.uint8(types.intp)

    def codegen(context, builder, signature, args):
        return builder.load(builder.inttoptr(args[0], ir.IntType(8).as_pointer()))

    return sig, codegen


def _word_intrinsic(build, doc: str):
    """An intrinsic from a 64-bit word to a 64-bit word: build(builder, word) emits its LLVM
    instruction."""
    @intrinsic
    def operation(typingctx, value):
        from numba import types

        sig = types.uint64(types.uint64)

        def codegen(context, builder, signature, args):
            return build(builder, args[0])

        return sig, codegen

    operation.__doc__ = doc
    return operation


def _zero_is_not_poison():
    """ctlz's and cttz's flag for 64 from a zero word."""
    from llvmlite import ir

    return ir.Constant(ir.IntType(1), 0)


_byte_swap = _word_intrinsic(lambda builder, word: builder.bswap(word),
                             "A 64-bit word's bytes in the reverse order.")
set_bits = _word_intrinsic(lambda builder, word: builder.ctpop(word),
                           "The set bits of a 64-bit word (one popcnt instruction).")
leading_zeros = _word_intrinsic(lambda builder, word: builder.ctlz(word, _zero_is_not_poison()),
                                "Leading zero bits of a 64-bit word (64 for zero).")
trailing_zeros = _word_intrinsic(lambda builder, word: builder.cttz(word, _zero_is_not_poison()),
                                 "Trailing zero bits of a 64-bit word (64 for zero).")


@njit(cache=True, nogil=True)
def load_be64(address):
    """The 8 bytes at `address` with the first byte in the high bits."""
    return _byte_swap(_load_u64(address))


# ----------------------------------------------------------------------------------------------
# packed query batch


@njit(cache=True, nogil=True)
def pack_query_words(sequence):
    """(packed bases, ambiguity bits) of a batch's blastna sequence, each with WORD_PAD zero
    bytes before and after; letters that are not bases pack as A with their bit set."""
    n = sequence.size
    packed = np.zeros(WORD_PAD + (n + 3) // 4 + WORD_PAD, dtype=np.uint8)
    ambiguous = np.zeros(WORD_PAD + (n + 7) // 8 + WORD_PAD, dtype=np.uint8)
    for i in range(n):
        letter = sequence[i]
        if letter < 4:
            packed[WORD_PAD + (i >> 2)] |= letter << (2 * (3 - (i & 3)))
        else:
            ambiguous[WORD_PAD + (i >> 3)] |= 1 << (7 - (i & 7))
    return packed, ambiguous


# ----------------------------------------------------------------------------------------------
# runs on packed subjects (preliminary stage)


@njit(cache=True, nogil=True)
def _packed_base(address, pos):
    return (_load_u8(address + (pos >> 2)) >> (2 * (3 - (pos & 3)))) & 3


@njit(cache=True, nogil=True)
def _packed_letter_run(q_bases, q_ambig, q_pos, s_bases, s_pos, n, limit, direction):
    """The packed runs' letter-at-a-time end: matches counted on from n, moving by
    `direction` (1 or -1), at most `limit`."""
    while n < limit:
        q = q_pos + direction * n
        s = s_pos + direction * n
        if (_load_u8(q_ambig + (q >> 3)) >> (7 - (q & 7))) & 1:
            break
        if _packed_base(q_bases, q) != _packed_base(s_bases, s):
            break
        n += 1
    return min(n, limit)


@njit(cache=True, nogil=True, inline="always")
def packed_run_forward(q_bases, q_ambig, q_pos, s_bases, s_bytes, s_pos, limit):
    """Matches from query letter q_pos and subject base s_pos on, at most `limit`.

    q_bases/q_ambig: addresses of the query's packed bases and ambiguity bits (index 0 is
    the batch's letter 0; WORD_PAD bytes are readable around them); s_bases: address of the
    subject's packed bases, s_bytes their number."""
    n = 0
    while n < limit:
        q = q_pos + n
        s = s_pos + n
        byte = s >> 2
        if byte + 8 > s_bytes:
            break
        qw = load_be64(q_bases + (q >> 2)) << np.uint64(2 * (q & 3))
        sw = load_be64(s_bases + byte) << np.uint64(2 * (s & 3))
        aw = load_be64(q_ambig + (q >> 3)) << np.uint64(q & 7)
        step = min(np.int64(leading_zeros(qw ^ sw) >> np.uint64(1)),
                   np.int64(leading_zeros(aw)), PACKED_STEP)
        n += step
        if step < PACKED_STEP:
            return min(n, limit)
    # the subject's last bytes, a letter at a time
    return _packed_letter_run(q_bases, q_ambig, q_pos, s_bases, s_pos, n, limit, 1)


@njit(cache=True, nogil=True, inline="always")
def packed_run_backward(q_bases, q_ambig, q_pos, s_bases, s_pos, limit):
    """Matches from query letter q_pos and subject base s_pos going down (both included),
    at most `limit`; arguments as packed_run_forward."""
    n = 0
    while n < limit:
        q = q_pos - n
        s = s_pos - n
        byte = s >> 2
        if byte < 7:
            break
        # the 8 bytes ending with the one holding the position, shifted so that the position
        # is the lowest base (bit); the letters before it lie above
        qw = load_be64(q_bases + (q >> 2) - 7) >> np.uint64(2 * (3 - (q & 3)))
        sw = load_be64(s_bases + byte - 7) >> np.uint64(2 * (3 - (s & 3)))
        aw = load_be64(q_ambig + (q >> 3) - 7) >> np.uint64(7 - (q & 7))
        step = min(np.int64(trailing_zeros(qw ^ sw) >> np.uint64(1)),
                   np.int64(trailing_zeros(aw)), PACKED_STEP)
        n += step
        if step < PACKED_STEP:
            return min(n, limit)
    return _packed_letter_run(q_bases, q_ambig, q_pos, s_bases, s_pos, n, limit, -1)


# ----------------------------------------------------------------------------------------------
# runs on blastna letters (traceback)


@njit(cache=True, nogil=True, inline="always")
def letter_run_forward(query, q_bytes, q_pos, subject, s_bytes, s_pos, limit):
    """Matches of blastna letters from query[q_pos] and subject[s_pos] on, at most `limit`;
    a query letter that is not a base never matches. query/subject are addresses of
    q_bytes/s_bytes letters."""
    n = 0
    while n < limit and s_pos + n + 8 <= s_bytes and q_pos + n + 8 <= q_bytes:
        qw = _load_u64(query + q_pos + n)
        sw = _load_u64(subject + s_pos + n)
        diff = (qw ^ sw) | (qw & np.uint64(AMBIGUOUS_BYTES))
        step = np.int64(trailing_zeros(diff) >> np.uint64(3))
        n += step
        if step < 8:
            return min(n, limit)
    while n < limit:
        a = _load_u8(query + q_pos + n)
        if a >= 4 or a != _load_u8(subject + s_pos + n):
            break
        n += 1
    return min(n, limit)


@njit(cache=True, nogil=True, inline="always")
def letter_run_backward(query, q_pos, subject, s_pos, limit):
    """As letter_run_forward going down from q_pos / s_pos (included)."""
    n = 0
    while n < limit and s_pos - n >= 7 and q_pos - n >= 7:
        qw = _load_u64(query + q_pos - n - 7)
        sw = _load_u64(subject + s_pos - n - 7)
        diff = (qw ^ sw) | (qw & np.uint64(AMBIGUOUS_BYTES))
        step = np.int64(leading_zeros(diff) >> np.uint64(3))
        n += step
        if step < 8:
            return min(n, limit)
    while n < limit:
        a = _load_u8(query + q_pos - n)
        if a >= 4 or a != _load_u8(subject + s_pos - n):
            break
        n += 1
    return min(n, limit)
