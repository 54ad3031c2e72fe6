"""NCBI's CRandom (seeded, or in its Reset() state) and the pseudo-random bases makeblastdb stores at ambiguous positions.

makeblastdb's 2-bit data holds, at every ambiguous position, a base drawn from NCBI's CRandom
(a lagged-Fibonacci generator with lags 33 and 13 on 32-bit words) seeded with the sequence
length. The preliminary search stages run on those bases, so a database that must give BLAST's
answers has to hold the very same ones.

Generator: state[0] = seed, state[i] = 1103515245 * state[i-1] + 12345 (mod 2^32) for i < 33;
two cursors j = 12 and k = 32; 330 values are drawn and dropped. A draw adds state[j] to
state[k] (mod 2^32), stores it in state[k], steps both cursors down (k wraps to 32 first; only
when k did not wrap may j wrap to 32) and returns the sum shifted right by one.

Substitute for an ambiguous ncbi4na code c (one draw per ambiguous position, in order):
N (15) and gap (0) take draw & 3; a two- or three-base code takes its (draw % bases)-th
set bit counting from A (bit 0) to T (bit 3).

The draws are the sequence x[n] = x[n-33] + x[n-13] (mod 2^32) over the state read from k
down, so makedb draws them in blocks with numpy (`SeededDraws`): each value of a block is a
fixed linear combination of the 33 values before the block. The compiled draw (`crandom_draw`)
serves DUST, one draw at a time.
"""

from functools import lru_cache

import numpy as np

from ..numba_start import njit

STATE_WORDS = 33
SHORT_LAG = 13
J_START = 12
WARMUP_DRAWS = 10 * STATE_WORDS
LCG_MULTIPLIER = 1103515245
LCG_INCREMENT = 12345
WORD_MASK = np.uint64(0xFFFFFFFF)
BLOCK_DRAWS = 4096


# CRandom's Reset() state (the default-constructed generator, unseeded): symmetric DUST draws
# its bases for N from one of these, fresh for every query.
RESET_WORDS = np.array([
    0xd53f1852, 0xdfc78b83, 0x4f256096, 0x0e643df7, 0x82c359bf, 0xc7794dfa, 0xd5e9ffaa,
    0x2c8cb64a, 0x2f07b334, 0xad5a7eb5, 0x96dc0cde, 0x6fc24589, 0xa5853646, 0xe71576e2,
    0x0dae30df, 0xb09ce711, 0x5e56ef87, 0x4b4b0082, 0x6f4f340e, 0xc5bb17e8, 0xd788d765,
    0x67498087, 0x9d7aba26, 0x261351d4, 0x411ee7ea, 0x0393a263, 0x2c5a5835, 0xc115fcd8,
    0x25e9132c, 0xd0c6e906, 0xc2bc5b2d, 0x6c065c98, 0x6e37bd55,
], dtype=np.uint32)


@njit(cache=True, nogil=True)
def crandom_reset():
    """Generator state of a default-constructed CRandom (Reset(): j = 12, k = 32)."""
    state = np.empty(STATE_WORDS + 2, dtype=np.uint32)
    state[:STATE_WORDS] = RESET_WORDS
    state[STATE_WORDS] = J_START
    state[STATE_WORDS + 1] = STATE_WORDS - 1
    return state


@njit(cache=True, nogil=True)
def crandom_draw(state):
    """Next value in [0, 2^31) (CRandom::GetRand)."""
    j = np.int64(state[STATE_WORDS])
    k = np.int64(state[STATE_WORDS + 1])
    total = np.uint32((np.uint64(state[k]) + np.uint64(state[j])) & np.uint64(0xFFFFFFFF))
    state[k] = total
    j -= 1
    k -= 1
    if k < 0:
        k = STATE_WORDS - 1
    elif j < 0:
        j = STATE_WORDS - 1
    state[STATE_WORDS] = j
    state[STATE_WORDS + 1] = k
    return np.int64(total >> np.uint32(1))


def _seed_coefficients() -> tuple[np.ndarray, np.ndarray]:
    """(a, c): state word i of the generator seeded with s is a[i] * s + c[i] (mod 2^32)."""
    a = np.ones(STATE_WORDS, dtype=np.uint64)
    c = np.zeros(STATE_WORDS, dtype=np.uint64)
    for i in range(1, STATE_WORDS):
        a[i] = (int(a[i - 1]) * LCG_MULTIPLIER) & 0xFFFFFFFF
        c[i] = (int(c[i - 1]) * LCG_MULTIPLIER + LCG_INCREMENT) & 0xFFFFFFFF
    return a, c


@lru_cache(maxsize=None)
def _draw_matrix(count: int) -> np.ndarray:
    """uint64 [count, 33]: row n holds the coefficients of the n-th next sum over the 33
    values before it (oldest first). Integer overflow wraps mod 2^64, which keeps every
    coefficient right mod 2^32, all that the sums need."""
    rows = np.zeros((STATE_WORDS + count, STATE_WORDS), dtype=np.uint64)
    rows[:STATE_WORDS] = np.eye(STATE_WORDS, dtype=np.uint64)
    for n in range(STATE_WORDS, STATE_WORDS + count, SHORT_LAG):
        end = min(n + SHORT_LAG, STATE_WORDS + count)
        rows[n:end] = rows[n - STATE_WORDS:end - STATE_WORDS] + rows[n - SHORT_LAG:end - SHORT_LAG]
    return rows[STATE_WORDS:]


_SEED_A, _SEED_C = _seed_coefficients()


class SeededDraws:
    """CRandom seeded with `seed` (its 330 warm-up draws done): `take(count)` returns its
    next `count` draws (CRandom::GetRand, in [0, 2^31)) as an int64 array."""

    def __init__(self, seed: int):
        state = (_SEED_A * np.uint64(seed & 0xFFFFFFFF) + _SEED_C) & WORD_MASK
        # the draws read state[k] then state[k - 1], ...: oldest first is the state reversed
        self._window = state[::-1].copy()
        self._advance(WARMUP_DRAWS)

    def _advance(self, count: int) -> np.ndarray:
        sums = (_draw_matrix(count) @ self._window) & WORD_MASK
        self._window = np.concatenate((self._window, sums))[-STATE_WORDS:]
        return sums

    def take(self, count: int) -> np.ndarray:
        parts = [self._advance(min(BLOCK_DRAWS, count - done))
                 for done in range(0, count, BLOCK_DRAWS)]
        sums = parts[0] if len(parts) == 1 else np.concatenate(parts or [np.zeros(0, np.uint64)])
        return (sums >> np.uint64(1)).astype(np.int64)


def _substitute_tables() -> tuple[np.ndarray, np.ndarray]:
    """(bases, picks): code c's number of bases, and its k-th base (2-bit) for k < bases.
    N (15) and gap (0) take draw & 3, which is draw % 4 over A, C, G, T."""
    bases = np.full(16, 4, dtype=np.int64)
    picks = np.tile(np.arange(4, dtype=np.uint8), (16, 1))
    for code in range(1, 15):
        bits = [bit for bit in range(4) if code >> bit & 1]
        bases[code] = len(bits)
        picks[code, :len(bits)] = bits
    return bases, picks


_BASES_OF, _PICKS = _substitute_tables()


def substitute_bases(codes: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """The 2-bit bases makeblastdb writes for ambiguous ncbi4na `codes`, one draw each."""
    codes = codes.astype(np.intp)
    return _PICKS[codes, draws % _BASES_OF[codes]]
