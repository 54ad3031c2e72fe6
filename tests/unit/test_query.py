"""Query batches: the lookup segments between masked ranges, and masks found on threads."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.options import make_options
from gblastn.query import PARALLEL_MASK_LETTERS, Query, _all_masks, _segments_between
from gblastn.pools import TaskPool


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
    out = np.empty((len(masked) + 1, 2), dtype=np.int32)
    got = [tuple(int(v) for v in row) for row in out[:_segments_between(masked, length, 0, out, 0)]]
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
    options = make_options("megablast")
    serial = _all_masks(queries, options)
    with TaskPool(4) as pool:
        threaded = _all_masks(queries, options, pool)
    assert any(len(m) for m in serial)
    assert len(serial) == len(threaded)
    for a, b in zip(serial, threaded):
        assert np.array_equal(a, b)


def batch_by_loops(queries, plus_masks, options):
    """build_batch written out context by context with numpy, as a reference."""
    from gblastn.alphabet import COMPLEMENT_BLASTNA, N_CODE, SENTINEL
    strands = (options.strand in ("both", "plus"), options.strand in ("both", "minus"))
    lengths = [len(queries[c // 2]) if strands[c % 2] else 0 for c in range(2 * len(queries))]
    offsets = [1]
    for c in range(1, len(lengths)):
        offsets.append(offsets[-1] + lengths[c - 1] + 1)
    sequence = np.full(offsets[-1] + lengths[-1] + 1, SENTINEL, dtype=np.uint8)
    masks, segments = [], []
    for c, (offset, length) in enumerate(zip(offsets, lengths)):
        plus = np.asarray(plus_masks[c // 2]).reshape(-1, 2)
        codes = queries[c // 2].codes
        if c % 2:
            codes = COMPLEMENT_BLASTNA[codes[::-1]]
            plus = np.column_stack([len(codes) - plus[:, 1], len(codes) - plus[:, 0]])[::-1]
        if length == 0:
            masks.append(np.zeros((0, 2), dtype=np.int32))
            continue
        sequence[offset:offset + length] = codes
        masks.append(plus)
        segments += [(offset + a, offset + b) for a, b in complement_by_loop(plus, length)]
    unmasked = sequence.copy()
    if not options.soft_masking:
        for offset, mask in zip(offsets, masks):
            for a, b in mask:
                sequence[offset + a:offset + b] = N_CODE
    return sequence, unmasked, offsets, lengths, masks, segments


@st.composite
def query_sets(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    queries = []
    for i in range(draw(st.integers(1, 5))):
        n = draw(st.integers(1, 300))
        codes = rng.integers(0, 4, n).astype(np.uint8)
        codes[rng.random(n) < 0.03] = 14
        lower = rng.random(n) < draw(st.sampled_from([0.0, 0.1, 0.5]))
        if draw(st.booleans()):  # a low-complexity stretch for DUST
            a = int(rng.integers(0, n))
            codes[a:a + 80] = 3
        queries.append(Query(f"q{i}", "", codes, lower))
    return queries


@settings(max_examples=200, deadline=None)
@given(query_sets(), st.sampled_from(["both", "plus", "minus"]), st.booleans(), st.booleans())
def test_batch_is_the_contexts_written_out(queries, strand, soft, lcase):
    from gblastn.query import build_batch
    options = make_options("megablast", strand=strand, soft_masking=soft, lcase_masking=lcase)
    batch = build_batch(queries, options)
    sequence, unmasked, offsets, lengths, masks, segments = batch_by_loops(
        queries, _all_masks(queries, options), options)
    assert np.array_equal(batch.sequence, sequence)
    assert np.array_equal(batch.unmasked_sequence, unmasked)
    assert batch.context_offset.tolist() == offsets
    assert batch.context_length.tolist() == lengths
    assert [m.tolist() for m in batch.masks] == [np.asarray(m).tolist() for m in masks]
    assert [tuple(r) for r in batch.lookup_segments.tolist()] == segments


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 15), max_size=41), st.data())
def test_a_query_pickles_packed_and_back(codes, data):
    import pickle

    lowercase = data.draw(st.lists(st.booleans(), min_size=len(codes), max_size=len(codes)))
    query = Query("q1", "q1 some title", np.array(codes, dtype=np.uint8),
                  np.array(lowercase, dtype=bool))
    back = pickle.loads(pickle.dumps(query))
    assert (back.id, back.defline) == (query.id, query.defline)
    assert back.codes.dtype == np.uint8 and back.codes.tolist() == codes
    assert back.lowercase.dtype == bool and back.lowercase.tolist() == lowercase


def test_a_pickled_query_takes_five_eighths_of_a_byte_a_letter():
    import pickle

    query = Query("q2", "", np.full(4000, 3, dtype=np.uint8), np.zeros(4000, dtype=bool))
    assert len(pickle.dumps(query)) < 4000 * 5 // 8 + 300


def _batch_fields(batch) -> tuple:
    return (batch.sequence.tolist(), batch.unmasked_sequence.tolist(),
            [m.tolist() for m in batch.masks], batch.lookup_segments.tolist())


@settings(max_examples=100, deadline=None)
@given(query_sets(), st.lists(st.booleans(), min_size=8, max_size=8))
def test_masks_found_ahead_make_the_same_batch(queries, known):
    """A driver may find some queries' masks ahead (query_masks, query by query): the batch
    is the one that finds them all itself."""
    from gblastn.query import build_batch, query_masks
    options = make_options("blastn", lcase_masking=True)
    found = [query_masks([q], options)[0] if known[k % len(known)] else None
             for k, q in enumerate(queries)]
    assert _batch_fields(build_batch(queries, options, masks_found=found)) == \
        _batch_fields(build_batch(queries, options))


def test_masks_found_ahead_are_taken_as_found():
    from gblastn.query import build_batch
    codes = np.zeros(100, dtype=np.uint8)
    query = Query("q", "", codes, np.zeros(100, dtype=bool))
    batch = build_batch([query], make_options("blastn"),
                        masks_found=[np.array([[10, 30]], dtype=np.int32)])
    assert batch.masks[0].tolist() == [[10, 30]]


def test_warnings_of_queries_without_statistics_keep_the_readers_order(monkeypatch):
    """Where masking is hard, queries are judged a block at a time: the reader's own
    warnings wait with their queries, so that every warning comes in the order of the
    queries, as with soft masking (judged one by one), across the blocks' edges."""
    import gblastn.query as query_module
    from gblastn.alphabet import encode_blastna
    from gblastn.options import make_options
    from gblastn.query import Query, warned_queries

    def query(name, letters):
        codes = encode_blastna(letters)
        return Query(name, name, codes, np.zeros(codes.size, dtype=bool))

    records = [query("n1", "N" * 30), query("e2", ""), query("ok3", "ACGTTGCAAGGTCCTAGGACTTGATCGGATAC"),
               query("n4", "RYKMN" * 6), query("e5", ""), query("n6", "N" * 8),
               query("ok7", "GATTACAGGCTTAAGCCTAGGATCCGATTTCGA")]

    def read(warn):
        for record in records:
            if not len(record):
                warn(f"reader: {record.id}")
            yield record
        warn("reader: end")

    monkeypatch.setattr(query_module, "MASKED_AT_ONCE", 2)
    said = {}
    for soft in (True, False):
        warnings = []
        got = list(warned_queries(read, make_options("megablast", dust=None,
                                                     soft_masking=soft), warnings.append))
        assert [q.id for q in got] == [q.id for q in records]
        said[soft] = warnings
        assert [q.has_statistics for q in got] == [False, False, True, False, False, False, True]
    assert said[True] == said[False]
    assert [text.split(": ")[1] if text.startswith("Warning") else text
            for text in said[True]] == ["[blastn] Query_1 n1", "reader: e2",
                                        "[blastn] Query_4 n4", "reader: e5",
                                        "[blastn] Query_6 n6", "reader: end"]
    # a database its filter left empty: the sentence joins each query's own warning (the
    # reader's here are not in blastn's words), or stands alone
    for soft in (True, False):
        warnings = []
        list(warned_queries(read, make_options("megablast", dust=None, soft_masking=soft),
                            warnings.append, filtered_empty=True))
        said[soft] = warnings
    assert said[True] == said[False]
    filtered = "Filtering resulted in an empty database. "
    assert [text for text in said[True] if filtered in text] == [
        f"Warning: [blastn] Query_1 n1: {query_module.INVALID_QUERY} {filtered}",
        f"Warning: [blastn] Query_2 e2: {filtered}",
        f"Warning: [blastn] Query_3 ok3: {filtered}",
        f"Warning: [blastn] Query_4 n4: {query_module.INVALID_QUERY} {filtered}",
        f"Warning: [blastn] Query_5 e5: {filtered}",
        f"Warning: [blastn] Query_6 n6: {query_module.INVALID_QUERY} {filtered}",
        f"Warning: [blastn] Query_7 ok7: {filtered}"]


def test_a_batch_is_unsearched_when_none_of_its_queries_has_statistics():
    import pickle

    from gblastn.query import mark_unsearched_batch

    def query(has_statistics):
        made = Query("q", "q", np.zeros(4, dtype=np.uint8), np.zeros(4, dtype=bool))
        made.has_statistics = has_statistics
        return made

    mixed, without = [query(False), query(True)], [query(False), query(False)]
    assert [q.batch_unsearched for q in mark_unsearched_batch(mixed)] == [False, False]
    assert [q.batch_unsearched for q in mark_unsearched_batch(without)] == [True, True]
    # a batch formed again with other queries (a dropped forecast) is judged afresh
    assert [q.batch_unsearched for q in mark_unsearched_batch(without[:1] + mixed[1:])] == \
        [False, False]
    marked = mark_unsearched_batch(without)[0]
    back = pickle.loads(pickle.dumps(marked))  # as a cluster's workers get it
    assert (back.has_statistics, back.batch_unsearched) == (False, True)
