"""HSP management (gblastn.hsp): containment (the indexed tree against plain lists), the
common-endpoint purge, rescoring with ambiguity letters, each chunk's rows merged into a
subject's as BLAST merges them, score ordering, and the order BLAST gives hit lists."""

import numpy as np
import pytest

from gblastn.alphabet import encode_blastna, score_matrix
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.hsp import Hsps, chunk_rows, containment_keep, hsp_rows, hsps_from_rows, \
    merge_chunk_rows, new_tree, purge_rows, reevaluate_with_ambiguities, rows_by_score, \
    score_order, score_order_rows, subject_rows, tree_add, tree_contains


def purge_common_endpoints(hsps: Hsps, purge: bool = True) -> Hsps:
    """purge_rows on Hsps (Blast_HSPListPurgeHSPsWithCommonEndpoints), as the tests state
    cases. Of HSPs sharing (context, query start, subject start), keep the first in start order
    (best score, then longest); likewise for shared ends.  With purge=False (BLAST's first
    traceback pass for blastn) a loser reaching further is trimmed to begin where the winner
    ends (or end where it begins) instead of being dropped; trimmed HSPs go to the end of the
    list as BLAST leaves them.  Edit scripts, when present, follow their HSPs."""
    if len(hsps) == 0:
        return hsps
    with_scripts = hsps.ops is not None
    if with_scripts:
        op_start, ops, op_len = hsps.op_start, hsps.ops, hsps.op_len
    else:
        op_start, ops, op_len = np.zeros(len(hsps) + 1, dtype=np.int64), \
            np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int32)
    rows, out_start, out_ops, out_len, _ = purge_rows(
        hsp_rows(hsps), op_start, ops, op_len, bool(purge))
    out = hsps_from_rows(rows)
    if with_scripts:
        out.op_start, out.ops, out.op_len = out_start, out_ops, out_len
    return out


def test_containment_with_diagonal_separation():
    tree = new_tree(4, 6)
    n = tree_add(tree, 0, 0, 10, 110, 20, 120, 90)
    # inside, same diagonal
    assert tree_contains(tree, n, 0, 30, 60, 40, 70, 50, 6)
    # inside but diagonals far apart
    assert not tree_contains(tree, n, 0, 30, 60, 60, 90, 50, 6)
    assert tree_contains(tree, n, 0, 30, 60, 60, 90, 50, 0)
    # higher score or other context: not contained
    assert not tree_contains(tree, n, 0, 30, 60, 40, 70, 91, 6)
    assert not tree_contains(tree, n, 1, 30, 60, 40, 70, 50, 6)


def test_tree_common_endpoint_eviction():
    tree = new_tree(4)
    n = tree_add(tree, 0, 0, 10, 50, 10, 50, 30)
    n = tree_add(tree, n, 0, 10, 80, 10, 80, 60)   # same start, better: evicts the first
    assert tree[0][0, 6] == 0 and tree[0][1, 6] == 1
    n2 = tree_add(tree, n, 0, 10, 70, 10, 70, 40)  # same start, worse: refused
    assert n2 == n


def test_purge_keeps_best_of_shared_start_and_end():
    rows = [[0, 10, 50, 10, 50, 30, 20, 20],
            [0, 10, 80, 10, 80, 60, 20, 20],
            [0, 5, 80, 5, 80, 50, 20, 20],
            [1, 10, 50, 10, 50, 30, 20, 20]]
    out = purge_common_endpoints(hsps_from_rows(rows), purge=True)
    kept = sorted(zip(out.context.tolist(), out.score.tolist()))
    assert kept == [(0, 60), (1, 30)]


def test_purge_without_delete_trims():
    rows = [[0, 0, 40, 0, 40, 40, 5, 5], [0, 0, 60, 0, 60, 35, 5, 5]]
    scripts = [(np.array([0], np.uint8), np.array([40], np.int32)),
               (np.array([0], np.uint8), np.array([60], np.int32))]
    out = purge_common_endpoints(hsps_from_rows(rows, scripts), purge=False)
    assert len(out) == 2
    trimmed = int(np.flatnonzero(out.score == 35)[0])
    assert out.q_start[trimmed] == 40 and out.op_len[out.op_start[trimmed]] == 20


def test_containment_filter_in_order():
    rows = np.array([[0, 0, 100, 0, 100, 100, 5, 5], [0, 10, 50, 10, 50, 40, 20, 20]])
    assert containment_keep(rows, 6).sum() == 1


def test_rescoring_with_n_and_gap():
    q = encode_blastna("ACGTACGTACGTACGTACGT")
    s = encode_blastna("ACGTACGNACGTACGTAACGT")
    query = q.astype(np.uint8)
    ops = np.array([0, 2 - 1, 0], np.uint8)  # sub, gap in query, sub
    ops[1] = 1
    nums = np.array([17, 1, 3], np.int32)
    m = score_matrix(1, -2).astype(np.int64)
    keep, score, qs, qe, ss, se, first, last, last_num = reevaluate_with_ambiguities(
        query, 0, q.size, s, 0, 0, ops, nums, m, 1, -2, 0, 0, 5)
    # half units: 2*(16 - 1) - 5 + 2*3 = 31 -> 15
    assert keep and score == 15 and (qs, qe, ss, se) == (0, 20, 0, 21)


def _reference_tree_run(ops, sep):
    """The containment tree as BLAST's semantics read, with plain lists: for each
    (ctx, qs, qe, ss, se, score) in order, (contained?, entries kept after adding)."""
    held, out = [], []

    def wins(t, h):
        if h[5] != t[5]:
            return h[5] > t[5]
        if h[2] - h[1] != t[2] - t[1]:
            return h[2] - h[1] < t[2] - t[1]
        return h[4] - h[3] < t[4] - t[3]

    for h in ops:
        ctx, qs, qe, ss, se, score = h
        contained = any(t[0] == ctx and score <= t[5] and t[1] <= qs <= t[2] and t[3] <= ss <= t[4]
                        and t[1] <= qe <= t[2] and t[3] <= se <= t[4]
                        and (sep == 0 or abs((t[1] - t[3]) - (qs - ss)) < sep
                             or abs((t[2] - t[4]) - (qe - se)) < sep) for t in held)
        refused = False
        for end in range(2):
            for t in list(held):
                shared = (t[1], t[3]) == (qs, ss) if end == 0 else (t[2], t[4]) == (qe, se)
                if t[0] != ctx or not shared:
                    continue
                if wins(t, h):
                    held.remove(t)
                else:
                    refused = True
                    break
            if refused:
                break
        if not refused:
            held.append(h)
        out.append((contained, sorted(held)))
    return out


@pytest.mark.parametrize("spread, span, count", [(300, 200, 400), (40_000, 3000, 1500)])
def test_indexed_tree_equals_plain_lists(spread, span, count):
    """Small coordinates, and (for the subject blocks of the tree without a separation)
    HSPs spread over many blocks, some spanning several."""
    rng = np.random.default_rng(5)
    for sep in (0, 6, 50):
        ops = []
        for _ in range(count):
            ctx = int(rng.integers(0, 3))
            qs, ss = int(rng.integers(0, spread)), int(rng.integers(0, spread))
            if ops and rng.random() < 0.3:   # reuse an endpoint now and then
                other = ops[int(rng.integers(0, len(ops)))]
                ctx, qs, ss = other[0], other[1], other[3]
            if ops and rng.random() < 0.3:   # inside an earlier one now and then
                other = ops[int(rng.integers(0, len(ops)))]
                ctx = other[0]
                qs = int(rng.integers(other[1], other[2] + 1))
                ss = int(rng.integers(other[3], other[4] + 1))
            qe, se = qs + int(rng.integers(1, span)), ss + int(rng.integers(1, span))
            ops.append((ctx, qs, qe, ss, se, int(rng.integers(1, 100))))
        tree = new_tree(len(ops), sep)
        n = 0
        for (ctx, qs, qe, ss, se, score), (contained, held) in zip(ops, _reference_tree_run(ops, sep)):
            assert tree_contains(tree, n, ctx, qs, qe, ss, se, score, sep) == contained
            n = tree_add(tree, n, ctx, qs, qe, ss, se, score)
            entries = tree[0][:n]
            alive = sorted(tuple(int(v) for v in e[:6]) for e in entries if e[6])
            assert alive == held


# -- successive subject chunks --------------------------------------------------------------

def _merged_reference(combined, new, split, overlap=100, diag_close=10, allow_gap=True):
    """Blast_HSPListsMerge for successive chunks, HSP by HSP in Python (allow_gap false: an
    ungapped search's, on one diagonal only)."""
    combined = [list(r) for r in combined.tolist()]
    new = [list(r) for r in new.tolist()]
    keep = [True] * len(new)
    old_in_strip = [i for i, r in enumerate(combined) if r[4] > split]
    new_in_strip = [j for j, r in enumerate(new) if r[3] < split + overlap]
    for i in old_in_strip:
        for j in new_in_strip:
            a, b = combined[i], new[j]
            if not keep[j] or a[0] != b[0] or abs((a[2] - a[4]) - (b[1] - b[3])) >= diag_close:
                continue
            if not allow_gap and (a[3] - b[3]) - (a[1] - b[1]) != 0:
                continue
            if not (a[1] <= b[1] <= a[2] and a[3] <= b[3] <= a[4]) and \
                    not (a[1] <= b[2] <= a[2] and a[3] <= b[4] <= a[4]):
                continue
            density = (a[5] + b[5]) / ((a[2] - a[1]) + (b[2] - b[1]))
            a[1], a[3], a[2], a[4] = min(a[1], b[1]), min(a[3], b[3]), max(a[2], b[2]), \
                max(a[4], b[4])
            if b[5] > a[5]:
                a[6], a[7], a[5] = b[6], b[7], b[5]
            a[5] = max(int(density * (a[2] - a[1])), a[5])
            keep[j] = False
    rows = combined + [r for r, k in zip(new, keep) if k]
    # score desc, s_start, s_end desc, q_start, q_end desc; stable
    return sorted(rows, key=lambda r: (-r[5], r[3], -r[4], r[1], -r[2]))


def _chunk_hsp_rows(rng, n, s_lo, s_hi):
    rows = np.zeros((n, 8), dtype=np.int64)
    rows[:, 0] = rng.integers(0, 2, n)
    length = rng.integers(20, 400, n)
    rows[:, 1] = rng.integers(0, 300, n)
    rows[:, 2] = rows[:, 1] + length
    rows[:, 3] = rng.integers(s_lo, s_hi, n)
    rows[:, 4] = rows[:, 3] + length + rng.integers(-3, 4, n)
    rows[:, 5] = rng.integers(10, 300, n)
    rows[:, 6] = rows[:, 1] + length // 2
    rows[:, 7] = rows[:, 3] + length // 2
    return rows


@pytest.mark.parametrize("allow_gap", [True, False])
def test_chunk_merge_matches_blasts_rule(allow_gap):
    """merge_chunk_rows against the rule written out HSP by HSP, on HSPs crowded around the
    strip where two chunks overlap (on an old HSP's diagonal or a few off it, so that many
    merge)."""
    rng = np.random.default_rng(11)
    split = 5000
    merges = 0
    for _ in range(300):
        old = _chunk_hsp_rows(rng, int(rng.integers(1, 40)), split - 500, split + 50)
        new = _chunk_hsp_rows(rng, int(rng.integers(1, 12)), split - 50, split + 150)
        old[::3, 5] = old[0, 5]   # equal scores: the order then comes from the coordinates
        old[1::4] = old[0]        # and rows equal in every key keep their order
        # some of the new chunk's HSPs start inside an old one, on its diagonal or near it
        # (a gapped search merges those too)
        for j in range(0, new.shape[0], 2):
            i = int(rng.integers(old.shape[0]))
            inside = int(rng.integers(0, old[i, 2] - old[i, 1] + 1))
            off_diagonal = int(rng.integers(-12, 13)) if j % 4 else 0
            new[j, 0] = old[i, 0]
            new[j, 1], new[j, 3] = old[i, 1] + inside, old[i, 3] + inside + off_diagonal
            new[j, 2], new[j, 4] = new[j, 1] + 100, new[j, 3] + 100
        # the chunks' rows come sorted by score, as chunk_rows and earlier merges leave them
        old, new = old[score_order_rows(old)], new[score_order_rows(new)]
        expected = _merged_reference(old, new, split, allow_gap=allow_gap)
        got = merge_chunk_rows(old.copy(), new, split, 100, 10, allow_gap)
        assert got.tolist() == expected
        merges += old.shape[0] + new.shape[0] - got.shape[0]
    assert merges > 100


def test_subject_rows_is_the_chunks_merged_one_by_one():
    """subject_rows in one call gives what chunk_rows and merge_chunk_rows give chunk by
    chunk, on chunks whose HSPs cross into the strips where they overlap, where the next
    chunk has HSPs starting on their diagonals."""
    rng = np.random.default_rng(5)
    step, overlap = 5000, 100
    merges = 0
    for _ in range(60):
        count = int(rng.integers(1, 7))
        starts = np.arange(count, dtype=np.int64) * step
        found = []
        for k in range(count):
            rows = _chunk_hsp_rows(rng, int(rng.integers(1, 25)), 0, step - 400)
            rows[::2, 3] = rng.integers(step - 140, step - 60, rows[::2].shape[0])
            rows[::2, 4] = rows[::2, 3] + 150  # into the strip [step, step + overlap)
            rows[::2, 2] = rows[::2, 1] + 150
            if k:
                # starting in the strip inside one of the previous chunk's HSPs, on its
                # diagonal
                for j in range(1, rows.shape[0], 2):
                    crossing = found[k - 1][::2]
                    i = int(rng.integers(crossing.shape[0]))
                    into = int(rng.integers(0, 10))
                    rows[j, 0] = crossing[i, 0]
                    rows[j, 3] = into
                    rows[j, 1] = crossing[i, 1] + step + into - crossing[i, 3]
                    rows[j, 2], rows[j, 4] = rows[j, 1] + 120, rows[j, 3] + 120
            found.append(rows)
        expected = chunk_rows(found[0], starts[0], True)
        for k in range(1, count):
            more = chunk_rows(found[k], starts[k], True)
            before = expected.shape[0] + more.shape[0]
            expected = merge_chunk_rows(expected, more, starts[k], overlap, 10)
            merges += before - expected.shape[0]
        bounds = np.cumsum([0] + [rows.shape[0] for rows in found])
        got = subject_rows(np.concatenate(found), bounds, starts, overlap, 10,
                           np.zeros(0, dtype=np.int64), True)
        assert got.tolist() == expected.tolist()
    assert merges > 50


def test_chunk_rows_purge_sort_and_shift():
    rng = np.random.default_rng(2)
    for _ in range(100):
        rows = _chunk_hsp_rows(rng, int(rng.integers(1, 30)), 0, 2000)
        rows[1::3, 1:4] = rows[0:-1:3, 1:4][: rows[1::3].shape[0]]  # shared starts
        expected = purge_common_endpoints(hsps_from_rows(rows))
        expected = expected.take(score_order(expected))
        got = hsps_from_rows(chunk_rows(rows, 700, True))
        for name in ("context", "q_start", "q_end", "score", "q_gapped_start"):
            assert getattr(got, name).tolist() == getattr(expected, name).tolist()
        for name in ("s_start", "s_end", "s_gapped_start"):
            assert getattr(got, name).tolist() == (getattr(expected, name) + 700).tolist()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_preliminary_hsps_come_in_score_order(size, seed):
    """engine.subject_hsps_by_query hands each query its HSPs in score order, so that the
    traceback searches' rows_by_score has nothing to sort (its check finds them in order)."""
    from types import SimpleNamespace

    from gblastn.engine import subject_hsps_by_query
    from gblastn.hsp import _in_score_order

    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 5, (size, 8))
    rows[:, 0] = rng.integers(0, 6, size)  # three queries, both strands
    stats = SimpleNamespace(lambdas=np.full(6, 1.28), log_ks=np.full(6, -0.3),
                            eff_searchsp=np.full(6, 10**9, dtype=np.int64), round_down=False)
    split = subject_hsps_by_query(hsps_from_rows(rows), stats, SimpleNamespace(evalue=1e300))
    for _, hsps in split:
        assert np.array_equal(hsp_rows(hsps), hsp_rows(hsps)[score_order(hsps)])
    lists = [hsps for _, hsps in split]
    if lists:
        owner = np.repeat(np.arange(len(lists)), [len(h) for h in lists])
        assert _in_score_order(np.concatenate([hsp_rows(h) for h in lists]), owner)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=8), st.integers(0, 2**32 - 1),
       st.sampled_from(["none", "some", "all"]))
def test_rows_by_score_equals_each_list_sorted(sizes, seed, ordered):
    """All lists' rows at once (engine.tails_ahead) = each list's rows in score order, one
    list after the other; small value ranges make ties, which keep their order. Lists
    already in score order (as the preliminary HSPs come) take the unsorted path when all
    are."""
    rng = np.random.default_rng(seed)
    lists = [hsps_from_rows(rng.integers(0, 4, (n, 8))) for n in sizes]
    lists = [h.take(score_order(h)) if ordered == "all" or (ordered == "some" and i % 2)
             else h for i, h in enumerate(lists)]
    expected = [hsp_rows(h)[score_order(h)] for h in lists]
    expected = np.concatenate(expected) if expected else np.zeros((0, 8), dtype=np.int64)
    assert np.array_equal(rows_by_score(lists), expected)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.lists(
    st.tuples(st.sampled_from([0.0, 1e-200, 1e-190, 1e-5, 0.5, 0.5000001, 2.0, 10.0]),
              st.integers(0, 5)), min_size=1, max_size=4)), max_size=12))
def test_best_first_orders_as_blast_compares_hsp_lists(subjects):
    """best_first against the comparison it implements, a key per pair, on E-values around
    the equality threshold, tied scores and repeated ordinals."""
    from gblastn.engine import best_first
    from gblastn.stats import EVALUE_EQUAL_BELOW

    items = _ranked_items(subjects)

    def key(item):
        ordinal, hsps = item
        best = float(hsps.evalue.min())
        return (0.0 if best < EVALUE_EQUAL_BELOW else best, -int(hsps.score.max()), -ordinal)

    assert [id(item) for item in best_first(items)] == [id(item) for item in sorted(items, key=key)]


_SUBJECTS = st.lists(st.tuples(st.integers(0, 50), st.lists(
    st.tuples(st.sampled_from([0.0, 1e-200, 1e-190, 1e-5, 0.5, 0.5000001, 2.0, 10.0]),
              st.integers(0, 5)), min_size=1, max_size=4)), max_size=6)


def _ranked_items(subjects) -> list:
    """(ordinal, Hsps) pairs with the given (E-value, score) HSPs."""
    items = []
    for ordinal, hsps in subjects:
        z = np.zeros(len(hsps), dtype=np.int32)
        h = Hsps(z, z, z, z, z, np.array([s for _, s in hsps], dtype=np.int32), z, z)
        h.evalue = np.array([e for e, _ in hsps])
        items.append((ordinal, h))
    return items


@settings(max_examples=200, deadline=None)
@given(st.lists(_SUBJECTS, max_size=8))
def test_best_first_each_ranks_each_list_as_best_first(lists):
    """Many queries' subjects ranked in one pass (query_results) come in each query's
    best_first order, ties and repeated ordinals included."""
    from gblastn.engine import best_first, best_first_each

    lists = [_ranked_items(subjects) for subjects in lists]
    ranked = best_first_each(lists)
    assert [[id(item) for item in items] for items in ranked] == \
        [[id(item) for item in best_first(items)] for items in lists]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 9), st.integers(0, 9), st.integers(0, 2**32 - 1))
def test_span_equals_take_of_the_range(start, end, seed):
    """Hsps.span (views, used to split a subject's HSPs by query) gives what take gives for
    the same range: fields, E-values, counts and edit scripts."""
    rng = np.random.default_rng(seed)
    n = 9
    hsps = hsps_from_rows(rng.integers(0, 100, (n, 8)),
                          [(rng.integers(0, 3, k), rng.integers(1, 9, k))
                           for k in rng.integers(0, 4, n)])
    hsps.evalue, hsps.bitscore = rng.random(n), rng.random(n)
    hsps.counts = rng.integers(0, 50, (n, 4))
    end = max(start, end)
    got, expected = hsps.span(start, end), hsps.take(np.arange(start, end))
    for name in ("context", "q_start", "q_end", "s_start", "s_end", "score", "q_gapped_start",
                 "s_gapped_start", "evalue", "bitscore", "counts", "op_start", "ops",
                 "op_len"):
        assert np.array_equal(getattr(got, name), getattr(expected, name)), name


_OPTIONAL_ROWS = ("evalue", "bitscore", "counts", "masked_identities")


@st.composite
def keyed_hsps(draw):
    """(key, Hsps) pairs as a shard's traceback gives them: any number of HSPs a subject,
    edit scripts and the optional columns present on some subjects and not others."""
    pairs = []
    for key in draw(st.lists(st.tuples(st.integers(0, 99), st.integers(0, 10**6)),
                             max_size=8, unique=True)):
        n = draw(st.integers(0, 4))
        hsps = Hsps(*(np.array(draw(st.lists(st.integers(-5, 10**5), min_size=n, max_size=n)),
                               dtype=np.int32) for _ in range(8)))
        for name in _OPTIONAL_ROWS:
            if draw(st.booleans()):
                shape = (n, 4) if name == "counts" else (n,)
                kind = np.int64 if name in ("counts", "masked_identities") else np.float64
                setattr(hsps, name, np.arange(np.prod(shape), dtype=kind).reshape(shape))
        if draw(st.booleans()):
            runs = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
            hsps.op_start = np.concatenate(([0], np.cumsum(runs))).astype(np.int64)
            hsps.ops = np.arange(hsps.op_start[-1], dtype=np.uint8) % 3
            hsps.op_len = np.arange(hsps.op_start[-1], dtype=np.int32) + 1
        pairs.append((key, hsps))
    return pairs


@settings(max_examples=60, deadline=None)
@given(keyed_hsps())
def test_packed_hsps_unpack_to_the_subjects_as_traced(pairs):
    """The traced subjects sent packed from one worker to another come out as they went in
    (every field, its type, None where a subject had none), in a few buffers whatever the
    number of subjects."""
    import dataclasses
    import pickle

    from gblastn.hsp import PackedHsps

    buffers = []
    data = pickle.dumps(PackedHsps.of(pairs), protocol=5, buffer_callback=buffers.append)
    unpacked = pickle.loads(data, buffers=buffers).unpacked()
    assert [key for key, _ in unpacked] == [key for key, _ in pairs]
    for (_, got), (_, expected) in zip(unpacked, pairs):
        for field in dataclasses.fields(Hsps):
            a, b = getattr(got, field.name), getattr(expected, field.name)
            assert (a is None) == (b is None), field.name
            if b is not None:
                assert a.dtype == b.dtype and a.shape == b.shape and \
                    a.tolist() == b.tolist(), field.name
    assert len(buffers) <= 3 * len(dataclasses.fields(Hsps)) + 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 8), st.integers(0, 8)), max_size=12),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_joined_views_equal_their_concatenation(spans, one_plain, seed):
    """hsp.joined gathers views made by Hsps.span (and spans of spans) from what they span,
    in any order and with empty ones, and equals np.concatenate of each field; a list with
    a view of unknown origin falls back to the concatenation."""
    from gblastn.hsp import joined

    rng = np.random.default_rng(seed)
    wholes = []
    for _ in range(3):
        whole = hsps_from_rows(rng.integers(0, 1000, (9, 8)))
        whole.evalue, whole.bitscore = rng.random(9), rng.random(9)
        whole.counts = rng.integers(0, 50, (9, 4))
        wholes.append(whole)
    views = [wholes[w].span(min(a, b), max(a, b)) for w, a, b in spans]
    views = [v.span(0, len(v)) if k % 3 == 2 else v for k, v in enumerate(views)]
    if one_plain and views:
        views[0] = views[0].take(np.arange(len(views[0])))
    names = ("context", "q_start", "score", "s_gapped_start", "evalue", "bitscore", "counts")
    if not views:
        return
    for got, name in zip(joined(views, names), names):
        expected = np.concatenate([getattr(v, name) for v in views])
        assert got.dtype == expected.dtype and np.array_equal(got, expected), name


def test_a_span_reads_as_its_own_hsps():
    """A span (its fields made when first read) pickles as a plain Hsps without what it
    spans, is remade whole by dataclasses.replace, and takes fields set on it afterwards."""
    import pickle
    from dataclasses import fields, replace

    whole = hsps_from_rows(np.arange(80).reshape(10, 8))
    whole.evalue, whole.bitscore = np.linspace(0, 1, 10), np.arange(10.0)
    span = whole.span(2, 5)
    assert len(span) == 3 and type(span).__name__ == "HspsSpan"
    copied = pickle.loads(pickle.dumps(span))
    assert type(copied) is Hsps and not hasattr(copied, "spanned")
    for f in fields(Hsps):
        mine, theirs = getattr(span, f.name), getattr(copied, f.name)
        assert (mine is None and theirs is None) or np.array_equal(mine, theirs), f.name
    moved = replace(span, q_start=span.q_start + 7)
    assert len(moved) == 3 and np.array_equal(moved.q_start, whole.q_start[2:5] + 7)
    assert np.array_equal(moved.score, whole.score[2:5]) and moved.ops is None
    span.masked_identities = np.array([1, 2, 3])
    assert span.masked_identities.tolist() == [1, 2, 3] and whole.masked_identities is None


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 12), st.integers(0, 4), st.integers(0, 2**32 - 1))
def test_max_hsps_candidates_hold_both_cuts(size, max_hsps, seed):
    """The HSPs the traceback keeps for max_hsps hold the first max_hsps in E-value order
    (the order given) and in score order, and nothing else; the order is kept."""
    from gblastn.hsp import max_hsps_candidates

    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 4, (size, 8)).astype(np.int64)
    index = rng.permutation(size).astype(np.int64)  # an E-value order
    got = max_hsps_candidates(rows, index, max_hsps)
    if max_hsps == 0 or size <= max_hsps:
        assert got.tolist() == index.tolist()
        return
    by_score = index[score_order_rows(rows[index])]
    wanted = set(index[:max_hsps].tolist()) | set(by_score[:max_hsps].tolist())
    assert got.tolist() == [i for i in index.tolist() if i in wanted]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=6), st.integers(1, 3),
       st.sampled_from([0.0, 30.0, 70.0]), st.integers(0, 2**32 - 1))
def test_hsp_limits_over_many_pairs_are_each_pairs(sizes, max_hsps, coverage, seed):
    """engine.within_hsp_limits cuts every pair as one pair alone is cut: max_hsps in score
    order (or in the E-value order given, where the query's hit list overflowed), then the
    query coverage test; pairs left without HSPs go."""
    from types import SimpleNamespace

    from gblastn.engine import within_hsp_limits

    rng = np.random.default_rng(seed)
    options = SimpleNamespace(max_hsps=max_hsps, qcov_hsp_perc=coverage)
    pairs = []
    for ordinal, size in enumerate(sizes):
        rows = rng.integers(0, 40, (size, 8))
        rows[:, 2] = rows[:, 1] + rng.integers(1, 60, size)  # q_end past q_start
        pairs.append((ordinal, hsps_from_rows(rows)))
    half = len(pairs) // 2
    lists, lengths, ordered = [pairs[:half], pairs[half:]], [100, 80], [False, True]
    got = within_hsp_limits(lists, lengths, ordered, options)
    for traced, length, in_order, limited in zip(lists, lengths, ordered, got):
        expected = []
        for ordinal, hsps in traced:
            place = np.arange(len(hsps)) if in_order else np.argsort(score_order(hsps))
            covered = 100.0 * (hsps.q_end - hsps.q_start) / length
            covered = np.where(covered < 99, covered + 0.5, covered)
            keep = (place < max_hsps) & (covered >= coverage)
            if keep.any():
                expected.append((ordinal, hsp_rows(hsps)[keep].tolist()))
        assert [(o, hsp_rows(h).tolist()) for o, h in limited] == expected
