"""HSP management: containment, endpoint purge, rescoring."""

import numpy as np

from gblastn.alphabet import encode_blastna, score_matrix
from gblastn.hsp import containment_keep, hsps_from_rows, new_tree, purge_common_endpoints, \
    reevaluate_with_ambiguities, tree_add, tree_contains


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


def test_indexed_tree_equals_plain_lists():
    rng = np.random.default_rng(5)
    for sep in (0, 6, 50):
        ops = []
        for _ in range(400):
            ctx = int(rng.integers(0, 3))
            qs, ss = int(rng.integers(0, 300)), int(rng.integers(0, 300))
            if ops and rng.random() < 0.3:   # reuse an endpoint now and then
                other = ops[int(rng.integers(0, len(ops)))]
                ctx, qs, ss = other[0], other[1], other[3]
            qe, se = qs + int(rng.integers(1, 200)), ss + int(rng.integers(1, 200))
            ops.append((ctx, qs, qe, ss, se, int(rng.integers(1, 100))))
        tree = new_tree(len(ops), sep)
        n = 0
        for (ctx, qs, qe, ss, se, score), (contained, held) in zip(ops, _reference_tree_run(ops, sep)):
            assert tree_contains(tree, n, ctx, qs, qe, ss, se, score, sep) == contained
            n = tree_add(tree, n, ctx, qs, qe, ss, se, score)
            entries = tree[0][:n]
            alive = sorted(tuple(int(v) for v in e[:6]) for e in entries if e[6])
            assert alive == held
