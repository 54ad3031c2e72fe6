"""The greedy aligner (gblastn.greedy), linear and affine gap costs: hand-made pairs with
known scores, edit scripts whose score is the alignment's, the X-drop stop, long
alignments past the first memory, and letters outside the range it reports having read
that change nothing."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.alphabet import encode_blastna, pack_2bit
from gblastn.greedy import greedy_gapped_alignment
from gblastn.layouts import OP_DEL, OP_INS, OP_SUB
from gblastn.wordrun import pack_query_words


def _align(q, s, q_off, s_off, xdrop=54, reward=1, penalty=-2, go=0, ge=0, traceback=True,
           packed=False):
    query = np.concatenate([[15], encode_blastna(q), [15]]).astype(np.uint8)
    subj = encode_blastna(s)
    subject = pack_2bit(np.where(subj > 3, 0, subj)) if packed else subj
    return greedy_gapped_alignment(query, pack_query_words(query), 1, len(q), subject, 0, len(s),
                                   packed, q_off, s_off, xdrop, reward, penalty, go, ge, traceback)


def _script_score(q, s, res, reward, penalty, gap_column):
    """Score of the edit script with linear gap columns (half units when needed)."""
    qa, sa = encode_blastna(q), encode_blastna(s)
    qp, sp, total = res[1], res[3], 0.0
    for op, n in zip(res[7][:res[9]], res[8][:res[9]]):
        if op == OP_SUB:
            for _ in range(n):
                total += reward if qa[qp] == sa[sp] and qa[qp] < 4 else penalty
                qp += 1
                sp += 1
        elif op == OP_DEL:
            total -= gap_column * n
            sp += n
        else:
            total -= gap_column * n
            qp += n
    assert qp == res[2] and sp == res[4]
    return total


def test_identical():
    q = "ACGTTGCAAGGCTTACCGATAGGACTTACG" * 3
    res = _align(q, q, 40, 40)
    assert res[:5] == (len(q), 0, len(q), 0, len(q))
    assert list(res[7][:res[9]]) == [OP_SUB] and res[8][0] == len(q)


def test_one_mismatch_and_packed_agrees():
    q = "ACGTTGCAAGGCTTACCGATAGGACTTACGGATCCA" * 2
    s = q[:30] + ("A" if q[30] != "A" else "C") + q[31:]
    full = _align(q, s, 10, 10)
    assert full[0] == len(q) - 1 - 2
    packed = _align(q, s, 10, 10, traceback=False, packed=True)
    assert packed[:5] == full[:5]


def test_one_indel_linear_cost():
    q = "ACGTTGCAAGGCTTACCGATAGGACTTACGGATCCATTGACCA" * 2
    s = q[:40] + q[41:]
    res = _align(q, s, 5, 5)
    # 85 matches, one gap column of 2.5: floor((2*85)*1/2 - 1*3) = 82
    assert res[0] == 82
    assert _script_score(q, s, res, 1, -2, 2.5) == 82.5
    assert OP_INS in list(res[7][:res[9]])


def test_many_indels_script_consistent():
    rng = np.random.default_rng(3)
    q = "".join(rng.choice(list("ACGT"), 400))
    s = list(q)
    for pos in (50, 120, 121, 200, 300):
        s.insert(pos, "G")
    del s[250]
    s = "".join(s)
    res = _align(q, s, 10, 10)
    assert res[1] == 0 and res[3] == 0
    total = _script_score(q, s, res, 1, -2, 2.5)
    assert abs(total - res[0]) < 1.0


def test_xdrop_stops_in_junk():
    rng = np.random.default_rng(5)
    core = "".join(rng.choice(list("ACGT"), 120))
    q = core + "".join(rng.choice(list("ACGT"), 200))
    s = core + "".join(rng.choice(list("ACGT"), 200))
    res = _align(q, s, 10, 10, xdrop=13)
    assert 120 <= res[2] < 160 and res[0] >= 110


def test_affine_costs():
    q = "ACGTTGCAAGGCTTACCGATAGGACTTACGGATCCATTGACCA" * 2
    s = q[:40] + q[43:]
    res = _align(q, s, 5, 5, reward=2, penalty=-3, go=5, ge=2, xdrop=110)
    # 83 matches * 2 - (5 + 3*2) = 155
    assert res[0] == 155
    assert OP_INS in list(res[7][:res[9]])


def _diverged_pair(n, seed, substitutions=0.06):
    """A random query and a copy with 6% substitutions (or as given) and an indel every ~250
    letters."""
    rng = np.random.default_rng(seed)
    q = rng.choice(list("ACGT"), n)
    s = []
    for i, c in enumerate(q):
        if rng.random() < 0.004:
            if rng.random() < 0.5:
                continue
            s.append(rng.choice(list("ACGT")))
        s.append(rng.choice([x for x in "ACGT" if x != c]) if rng.random() < substitutions else c)
    return "".join(q), "".join(s)


def test_long_alignment_beyond_first_memory():
    # each direction needs more than GREEDY_MAX_COST distances: the aligner's memory grows
    q, s = _diverged_pair(40000, 11)
    for go, ge, xdrop in ((0, 0, 54), (5, 2, 60)):
        res = _align(q, s, 20000, 20000 * len(s) // len(q), xdrop=xdrop, go=go, ge=ge)
        assert res[1] < 100 and res[2] > len(q) - 100
        if go == 0:
            # gap reduction may only improve the script on the greedy score
            assert res[0] - 1.0 < _script_score(q, s, res, 1, -2, 2.5) < res[0] + 40
        prelim = _align(q, s, 20000, 20000 * len(s) // len(q), xdrop=xdrop, go=go, ge=ge,
                        traceback=False, packed=True)
        assert prelim[:5] == res[:5]



def _poisoned_outside(subject, start, end):
    """`subject` with every base letter outside [start, end) turned into another base."""
    poisoned = subject.copy()
    outside = np.ones(subject.size, dtype=bool)
    outside[max(start, 0):max(end, 0)] = False
    poisoned[outside & (subject < 4)] ^= 1
    return poisoned


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), affine=st.booleans())
def test_letters_outside_the_read_range_change_nothing(seed, affine):
    """The subject range a traceback search reports as read bounds every letter it used:
    letters changed outside it give the same alignment (the traceback relies on this to
    unpack only the letters around the HSPs)."""
    rng = np.random.default_rng(seed)
    core = rng.integers(0, 4, int(rng.integers(40, 400))).astype(np.uint8)
    left = rng.integers(0, 4, int(rng.integers(0, 300))).astype(np.uint8)
    right = rng.integers(0, 4, int(rng.integers(0, 300))).astype(np.uint8)
    subject = np.concatenate([left, core, right])
    query = core.copy()
    flips = rng.random(query.size) < rng.uniform(0.0, 0.15)
    query[flips] = (query[flips] + 1) % 4
    query = np.concatenate([[15], query, [15]]).astype(np.uint8)
    q_off = int(rng.integers(0, core.size))
    gap_open, gap_extend = (2, 2) if affine else (0, 0)

    def align(letters):
        return greedy_gapped_alignment(query, pack_query_words(query), 1, core.size, letters,
                                       0, letters.size, False, q_off, left.size + q_off, 30, 1,
                                       -2, gap_open, gap_extend, True)

    res = align(subject)
    read_start, read_end = res[10], res[11]
    assert read_start <= res[3] and res[4] <= read_end
    again = align(_poisoned_outside(subject, read_start, read_end))
    assert again[:7] == res[:7]
    assert list(again[7][:again[9]]) == list(res[7][:res[9]])
    assert list(again[8][:again[9]]) == list(res[8][:res[9]])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), length=st.integers(50, 6000),
       divergence=st.floats(0.0, 0.2))
def test_the_score_only_search_keeps_two_rows_with_the_traceback_search_s_box(seed, length,
                                                                             divergence):
    """Without traceback the search keeps only the rows it still reads (the latest moved to
    the front when the memory fills): the same score and box as the search that keeps
    every row, whatever the distance reached."""
    rng = np.random.default_rng(seed)
    q, s = _diverged_pair(length, int(rng.integers(0, 2**31)), divergence)
    q_off = int(rng.integers(0, len(q)))
    s_off = min(len(s) - 1, q_off * len(s) // len(q))
    full = _align(q, s, q_off, s_off)
    score_only = _align(q, s, q_off, s_off, traceback=False)
    assert score_only[:5] == full[:5]
    assert score_only[10:] == full[10:]
