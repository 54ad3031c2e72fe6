"""Query batches: the lookup segments between masked ranges, and masks found on threads."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.options import make_options
from gblastn.query import PARALLEL_MASK_LETTERS, Query, _all_masks, _complement_ranges


def complement_by_loop(masked, length):
    """The rule written out range by range: a segment runs from the furthest end seen so far
    to the next masked start."""
    segments, pos = [], 0
    for start, end in masked:
        if start > pos:
            segments.append((pos, start))
        pos = max(pos, end)
    if pos < length:
        segments.append((pos, length))
    return segments


@st.composite
def masked_ranges(draw):
    length = draw(st.integers(0, 200))
    starts = sorted(draw(st.lists(st.integers(0, length), max_size=8)))
    ranges = [(a, min(length, a + draw(st.integers(0, 60)))) for a in starts]
    return np.array(ranges, dtype=np.int32).reshape(-1, 2), length


@settings(max_examples=500, deadline=None)
@given(masked_ranges())
def test_complement_ranges_follow_the_rule(case):
    masked, length = case
    got = [tuple(int(v) for v in row) for row in _complement_ranges(masked, length)]
    assert got == complement_by_loop(masked, length)


def test_masks_on_threads_are_the_masks_in_query_order():
    rng = np.random.default_rng(5)
    queries = []
    for i, n in enumerate([40, 90_000, 300, 150_000, 12_000, 7]):
        codes = rng.integers(0, 4, n).astype(np.uint8)
        for a in rng.integers(0, max(1, n - 200), max(1, n // 5000)):
            codes[a:a + 150] = np.tile(codes[a:a + 3], 50)[:codes[a:a + 150].size]
        queries.append(Query(f"q{i}", "", codes, np.zeros(n, dtype=bool)))
    assert sum(len(q) for q in queries) >= PARALLEL_MASK_LETTERS
    serial = _all_masks(queries, make_options("megablast", num_threads=1))
    threaded = _all_masks(queries, make_options("megablast", num_threads=4))
    assert any(len(m) for m in serial)
    assert len(serial) == len(threaded)
    for a, b in zip(serial, threaded):
        assert np.array_equal(a, b)
