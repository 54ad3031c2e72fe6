"""makedb's streaming encoder and CRandom in blocks, against plain reference implementations."""

import numpy as np
import pytest

from gblastn.db.crandom import BLOCK_DRAWS, SeededDraws
from gblastn.db.encode import NCBI4NA_FROM_ASCII, SequenceEncoder

BASES = {1: 0, 2: 1, 4: 2, 8: 3}  # ncbi4na code of A, C, G, T -> 2-bit base


def reference_draws(seed: int, count: int) -> list[int]:
    """NCBI's CRandom step by step, as crandom.py's docstring describes it."""
    state = [seed & 0xFFFFFFFF]
    for _ in range(32):
        state.append((state[-1] * 1103515245 + 12345) & 0xFFFFFFFF)
    j, k = 12, 32
    draws = []
    for _ in range(330 + count):
        total = (state[k] + state[j]) & 0xFFFFFFFF
        state[k] = total
        j, k = j - 1, k - 1
        if k < 0:
            k = 32
        elif j < 0:
            j = 32
        draws.append(total >> 1)
    return draws[330:]


def reference_encoding(letters: bytes):
    """(packed bytes, runs) as makeblastdb stores a sequence: 2-bit bases, a drawn base at
    each ambiguous letter, and the runs of one ambiguity code."""
    codes = [int(NCBI4NA_FROM_ASCII[b]) for b in letters]
    ambiguous = [i for i, code in enumerate(codes) if code not in BASES]
    draws = iter(reference_draws(len(letters), len(ambiguous)))
    bases = []
    for code in codes:
        if code in BASES:
            bases.append(BASES[code])
        else:
            draw = next(draws)
            bits = [bit for bit in range(4) if code >> bit & 1 or code == 0]
            bases.append(bits[draw % len(bits)])
    bases += [0] * (-len(bases) % 4)
    packed = bytes(bases[i] << 6 | bases[i + 1] << 4 | bases[i + 2] << 2 | bases[i + 3]
                   for i in range(0, len(bases), 4))
    runs = []
    for i in ambiguous:
        if runs and runs[-1][0] + runs[-1][1] == i and runs[-1][2] == codes[i]:
            runs[-1][1] += 1
        else:
            runs.append([i, 1, codes[i]])
    return packed, [tuple(run) for run in runs]


@pytest.mark.parametrize("seed", [0, 1, 7, 300_000, 2**32 + 5, 2**31 - 1])
def test_seeded_draws_in_blocks_are_crandoms(seed):
    draws = SeededDraws(seed)
    sizes = [1, 5, BLOCK_DRAWS + 3, 40, 2 * BLOCK_DRAWS]
    got = np.concatenate([draws.take(size) for size in sizes]).tolist()
    assert got == reference_draws(seed, sum(sizes))


@pytest.mark.parametrize("alphabet", ["ACGT", "ACGTN", "NNNNNNNNRYKM-acgtnuACGT", "N", "acgtu"])
def test_encoder_fed_in_pieces_stores_what_makeblastdb_stores(alphabet):
    rng = np.random.default_rng(len(alphabet))
    for _ in range(40):
        symbols = np.frombuffer(alphabet.encode(), np.uint8)
        letters = bytes(rng.choice(symbols, rng.integers(1, 3000)))
        encoder = SequenceEncoder()
        at = 0
        while at < len(letters):  # pieces of any size, as chunks of FASTA lines come
            step = int(rng.integers(1, 60)) if rng.random() < 0.7 else int(rng.integers(1, 2000))
            encoder.add(letters[at:at + step])
            at += step
        encoded = encoder.finish()
        packed, runs = reference_encoding(letters)
        assert bytes(encoded.packed) == packed
        assert encoded.length == len(letters)
        assert list(zip(encoded.amb_offset.tolist(), encoded.amb_length.tolist(),
                        encoded.amb_code.tolist())) == runs


def test_a_run_longer_than_a_block_of_draws():
    letters = b"AC" + b"N" * (3 * BLOCK_DRAWS + 17) + b"RYGT"
    encoder = SequenceEncoder()
    encoder.add(letters)
    encoded = encoder.finish()
    packed, runs = reference_encoding(letters)
    n_run = 3 * BLOCK_DRAWS + 17
    assert runs == [(2, n_run, 15), (2 + n_run, 1, 5), (3 + n_run, 1, 10)]
    assert bytes(encoded.packed) == packed
