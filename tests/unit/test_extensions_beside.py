"""engine.sliced_initial_hits with the hits' gapped extensions made beside the later slices'
scans (ExtensionsBeside): the same hits and the same extensions as one call for every hit,
whatever the slices and however the calls group them."""

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn import engine
from gblastn.engine import (ExtensionsAhead, ScannedSeeds, SubjectChunks, VolumeHits,
                            sliced_initial_hits)
from gblastn.layouts import GAPPED_AHEAD_FIELDS
from gblastn.scan import Seeds
from gblastn.ungapped import InitialHits


def volume(lengths: list) -> SubjectChunks:
    n = len(lengths)
    length = np.asarray(lengths, dtype=np.int32)
    return SubjectChunks(np.arange(n, dtype=np.int32), np.zeros(n, np.int64),
                         np.concatenate(([0], np.cumsum(length[:-1] // 4 + 1))).astype(np.int64),
                         length)


def chunk_hits(part: SubjectChunks) -> InitialHits:
    """A made-up pass: (length mod 4) hits a chunk, placed by its length and byte offset,
    chunks numbered within `part`."""
    per = part.length.astype(np.int64) % 4
    chunk = np.repeat(np.arange(per.size), per).astype(np.int32)
    rank = (np.arange(chunk.size) - np.repeat(np.cumsum(per) - per, per)).astype(np.int32)
    s_start = (part.length[chunk] // 5 + rank).astype(np.int32)
    q_start = (part.byte_offset[chunk] % 97 + rank).astype(np.int32)
    ones = np.ones(chunk.size, np.int32)
    return InitialHits(chunk, q_start, s_start, ones, ones, q_start, s_start)


def extensions(hits: InitialHits, part: SubjectChunks) -> ExtensionsAhead | None:
    """A made-up extension of each hit alone, reading its chunk's place in the volume."""
    if not len(hits):
        return None
    rows = np.zeros((len(hits), GAPPED_AHEAD_FIELDS), dtype=np.int64)
    rows[:, 0] = part.byte_offset[hits.chunk] * 1000 + hits.s_start
    rows[:, 1] = hits.q_start
    return ExtensionsAhead(rows)


def search(chunks: SubjectChunks, slice_seeds: int, made_ahead) -> VolumeHits:
    def scan(part):  # a seed a letter: slices after the first of about slice_seeds letters
        return ScannedSeeds(Seeds.empty(), count=int(part.length.sum()), hits=chunk_hits(part))

    def extend(scanned, part):
        return VolumeHits(scanned.hits)

    return sliced_initial_hits(chunks, scan, extend, slice_seeds, None, made_ahead)


@pytest.fixture(autouse=True)
def calls_of_any_size(monkeypatch):
    monkeypatch.setattr(engine, "BESIDE_HITS", 1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3_000_000), min_size=1, max_size=40),
       st.integers(1, 8_000_000), st.integers(1, 20))
def test_extensions_beside_the_scans_are_one_calls(lengths, slice_seeds, least):
    engine.BESIDE_HITS = least
    chunks = volume(lengths)
    whole = chunk_hits(chunks)
    want = extensions(whole, chunks)
    got = search(chunks, slice_seeds, extensions)
    for field in ("chunk", "q_start", "s_start"):
        assert np.array_equal(getattr(got.hits, field), getattr(whole, field))
    expected = want.extensions if want is not None else \
        np.zeros((0, GAPPED_AHEAD_FIELDS), dtype=np.int64)
    assert np.array_equal(got.ahead.extensions, expected)


def test_slow_calls_take_the_slices_that_came_meanwhile():
    """While a call runs the next slices wait, then go in one call over their chunks (a
    first slice of one chunk: longer than FIRST_SLICE_LETTERS)."""
    chunks = volume([5_000_001 + k for k in range(64)])
    calls = []
    first_running = threading.Event()

    def slow(hits, part):
        calls.append(len(part.length))
        if len(calls) == 1:
            first_running.set()
            time.sleep(0.2)
        return extensions(hits, part)

    got = search(chunks, 1, slow)
    assert first_running.is_set()
    assert calls[0] == 1 and len(calls) < len(chunks.length) and sum(calls) == 64
    assert np.array_equal(got.ahead.extensions,
                          extensions(chunk_hits(chunks), chunks).extensions)


def test_calls_wait_for_enough_hits():
    """Every call but the last extends at least BESIDE_HITS hits."""
    engine.BESIDE_HITS = 9
    chunks = volume([5_000_001 + k for k in range(64)])  # 1 or 2 hits a chunk
    sizes = []

    def counted(hits, part):
        sizes.append(len(hits))
        return extensions(hits, part)

    got = search(chunks, 1, counted)
    assert min(sizes[:-1]) >= 9 and sum(sizes) == len(got.hits) and len(sizes) > 3


def test_a_failed_call_fails_the_search():
    def failing(hits, part):
        raise RuntimeError("device lost")

    with pytest.raises(RuntimeError, match="device lost"):
        search(volume([7, 11, 3]), 1, failing)
