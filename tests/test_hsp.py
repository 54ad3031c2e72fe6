"""HSP management: containment, endpoint purge, rescoring."""

import numpy as np

from gblastn.alphabet import encode_blastna, score_matrix
from gblastn.hsp import containment_filter, hsps_from_rows, new_tree, purge_common_endpoints, \
    reevaluate_with_ambiguities, tree_add, tree_contains


def test_containment_with_diagonal_separation():
    tree = new_tree(4)
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
    assert tree[0, 6] == 0 and tree[1, 6] == 1
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
    rows = [[0, 0, 100, 0, 100, 100, 5, 5], [0, 10, 50, 10, 50, 40, 20, 20]]
    assert len(containment_filter(hsps_from_rows(rows), 6)) == 1


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
