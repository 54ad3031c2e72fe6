"""Word-at-a-time exact runs against a letter-at-a-time reference."""

import numpy as np
from hypothesis import given, settings, strategies as st

from gblastn.alphabet import pack_2bit
from gblastn.wordrun import WORD_PAD, letter_run_backward, letter_run_forward, \
    pack_query_words, packed_run_backward, packed_run_forward


def _reference(query, subject, q_pos, s_pos, limit, step):
    """Matches from (q_pos, s_pos) moving by step; a query letter >= 4 never matches."""
    n = 0
    while n < limit and query[q_pos + step * n] < 4 and \
            query[q_pos + step * n] == subject[s_pos + step * n]:
        n += 1
    return n


@st.composite
def _pairs(draw):
    """A query and a subject that share a stretch (so runs are long as well as short), with
    ambiguous query letters and substitutions sprinkled in, and positions to start from."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    length = draw(st.integers(1, 300))
    subject = rng.integers(0, 4, length).astype(np.uint8)
    query = subject.copy()
    for rate, letters in ((draw(st.sampled_from([0.0, 0.01, 0.1])), (0, 4)),
                          (draw(st.sampled_from([0.0, 0.02])), (4, 16))):
        where = rng.random(length) < rate
        query[where] = rng.integers(*letters, where.sum())
    q_pos = draw(st.integers(0, length - 1))
    shift = draw(st.integers(-3, 3))
    s_pos = min(max(q_pos + shift, 0), length - 1)
    return query, subject, q_pos, s_pos


@settings(max_examples=300, deadline=None)
@given(_pairs())
def test_packed_runs_match_reference(case):
    query, subject, q_pos, s_pos = case
    bases, ambig = pack_query_words(query)
    packed = pack_2bit(subject)
    q_bases, q_ambig = bases.ctypes.data + WORD_PAD, ambig.ctypes.data + WORD_PAD
    forward = min(len(query) - q_pos, len(subject) - s_pos)
    assert packed_run_forward(q_bases, q_ambig, q_pos, packed.ctypes.data, packed.size, s_pos,
                              forward) == _reference(query, subject, q_pos, s_pos, forward, 1)
    backward = min(q_pos, s_pos) + 1
    assert packed_run_backward(q_bases, q_ambig, q_pos, packed.ctypes.data, s_pos, backward) \
        == _reference(query, subject, q_pos, s_pos, backward, -1)


@settings(max_examples=300, deadline=None)
@given(_pairs())
def test_letter_runs_match_reference(case):
    query, subject, q_pos, s_pos = case
    # true subject letters may be ambiguity codes too; they never equal a base
    subject = subject.copy()
    subject[::37] = 14
    forward = min(len(query) - q_pos, len(subject) - s_pos)
    assert letter_run_forward(query.ctypes.data, query.size, q_pos, subject.ctypes.data,
                              subject.size, s_pos, forward) == \
        _reference(query, subject, q_pos, s_pos, forward, 1)
    backward = min(q_pos, s_pos) + 1
    assert letter_run_backward(query.ctypes.data, q_pos, subject.ctypes.data, s_pos,
                               backward) == _reference(query, subject, q_pos, s_pos, backward, -1)


def test_limit_caps_a_long_run():
    letters = np.tile(np.arange(4, dtype=np.uint8), 50)
    bases, ambig = pack_query_words(letters)
    packed = pack_2bit(letters)
    assert packed_run_forward(bases.ctypes.data + WORD_PAD, ambig.ctypes.data + WORD_PAD, 3,
                              packed.ctypes.data, packed.size, 3, 150) == 150
    assert letter_run_backward(letters.ctypes.data, 199, letters.ctypes.data, 199, 200) == 200
