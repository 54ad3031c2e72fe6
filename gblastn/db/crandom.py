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
"""

import numpy as np

from ..numba_start import njit

STATE_WORDS = 33
J_START = 12
WARMUP_DRAWS = 10 * STATE_WORDS


@njit(cache=True, nogil=True)
def crandom_new(seed):
    """Generator state for `seed`: uint32[35], words 33 and 34 hold the cursors j and k."""
    state = np.empty(STATE_WORDS + 2, dtype=np.uint32)
    value = np.uint32(seed & 0xFFFFFFFF)
    state[0] = value
    for i in range(1, STATE_WORDS):
        value = np.uint32((np.uint64(value) * np.uint64(1103515245) + np.uint64(12345)) & np.uint64(0xFFFFFFFF))
        state[i] = value
    state[STATE_WORDS] = J_START
    state[STATE_WORDS + 1] = STATE_WORDS - 1
    for _ in range(WARMUP_DRAWS):
        crandom_draw(state)
    return state


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


@njit(cache=True, nogil=True)
def substitute_base(state, ncbi4na_code):
    """The 2-bit base makeblastdb writes for one ambiguous position (one draw)."""
    draw = crandom_draw(state)
    if ncbi4na_code == 15 or ncbi4na_code == 0:
        return draw & 3
    bases = 0
    for bit in range(4):
        bases += (ncbi4na_code >> bit) & 1
    pick = draw % bases
    for bit in range(4):
        if (ncbi4na_code >> bit) & 1:
            if pick == 0:
                return bit
            pick -= 1
    return 0
