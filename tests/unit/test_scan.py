"""Scan + mini-extension + s_TypeOfWord against a brute-force reference written from the spec."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.alphabet import pack_2bit
from gblastn.layouts import EXTEND_BASEWISE, EXTEND_DIRECT, EXTEND_SMALL, EXTEND_SMALL_ONE_BYTE, \
    TABLE_MEGABLAST as MEGABLAST, TABLE_SMALL as SMALL, TABLE_STANDARD as STANDARD
from gblastn.lookup import build_lookup
from gblastn.options import make_options
from gblastn.pools import on_threads
from gblastn.query import Query, build_batch
from gblastn.layouts import SEED_FIELDS
from gblastn.lookup import words_of
from gblastn.scan.cpu import QUAD_PAD, _table_args, choose_extend, context_at, context_of, \
    find_seeds, listed_at, offset_contexts, query_quad, query_quads, scan_chunks, scan_into
from gblastn.wordrun import WORD_PAD


def make_case(rng, query_lengths, subject_lengths, task, n_plants=6, **kw):
    """Random queries; subjects carry pieces of the queries (both strands), with a few
    mutations so that extensions stop at varied places."""
    options = make_options(task, dust="no", **kw)
    queries = [rng.integers(0, 4, n).astype(np.uint8) for n in query_lengths]
    batch = build_batch([Query(f"q{i}", "", q, np.zeros(q.size, bool))
                         for i, q in enumerate(queries)], options)
    subjects = []
    for n in subject_lengths:
        s = rng.integers(0, 4, n).astype(np.uint8)
        for _ in range(n_plants if n > 25 else 0):
            src = batch.sequence[batch.context_offset[rng.integers(batch.num_contexts)]:]
            src = src[:int(batch.context_length.min())]
            ln = int(rng.integers(20, min(120, src.size, n) + 1))
            a = int(rng.integers(0, src.size - ln + 1))
            b = int(rng.integers(0, n - ln + 1))
            piece = src[a:a + ln].copy()
            flips = rng.random(ln) < 0.03
            piece[flips] = (piece[flips] + 1) % 4
            s[b:b + ln] = piece
        subjects.append(s)
    return batch, options, subjects


def pack_chunks(subjects):
    """Chunks start on byte boundaries: pad every subject to a multiple of 4."""
    pieces, offsets, pos = [], [], 0
    for s in subjects:
        padded = np.zeros((s.size + 3) // 4 * 4, dtype=np.uint8)
        padded[:s.size] = s
        offsets.append(pos // 4)
        pieces.append(padded)
        pos += padded.size
    packed = pack_2bit(np.concatenate(pieces))
    return packed, np.array(offsets, np.int64), np.array([s.size for s in subjects], np.int32)


def reference_seeds(batch, table, subjects):
    """Every stride position, every query offset of an indexed w-mer equal to the subject's;
    extend left (up to W - w) then right over exact matches, within the subject and the
    query context; keep it when W letters match. Queries here have no ambiguity and no
    masks, so s_TypeOfWord never rejects or slides."""
    W, w, step = table.word_size, table.width, table.scan_step
    seq = batch.sequence
    index = {}
    for a, b in batch.lookup_segments:
        if b - a < W:
            continue
        for p in range(a, b - w + 1):
            index.setdefault(bytes(seq[p:p + w]), []).append(p)
    out = []
    for c, s in enumerate(subjects):
        for h in range(0, s.size - w + 1, step):
            for q in index.get(bytes(s[h:h + w]), []):
                ctx = batch.context_of(q)
                lo = batch.context_offset[ctx]
                hi = lo + batch.context_length[ctx]
                left = 0
                while left < W - w and h - left > 0 and q - left > lo and s[h - left - 1] == seq[q - left - 1]:
                    left += 1
                right = 0
                while (left + right < W - w and h + w + right < s.size and q + w + right < hi
                       and s[h + w + right] == seq[q + w + right]):
                    right += 1
                if left + right == W - w:
                    out.append((c, q - left, h - left, h))
    return sorted(out)


def got_seeds(seeds):
    return sorted(zip(seeds.chunk.tolist(), seeds.q_off.tolist(), seeds.s_off.tolist(),
                      seeds.hit_s.tolist()))


CASES = [
    # task, query lengths, overrides, expected (kind, width, step, extension)
    ("megablast", [700, 300], {}, (SMALL, 8, 21, EXTEND_SMALL)),
    ("megablast", [5000], {}, (MEGABLAST, 11, 18, EXTEND_BASEWISE)),
    ("blastn", [600], {}, (SMALL, 8, 4, EXTEND_SMALL_ONE_BYTE)),
    ("blastn", [9000], {}, (MEGABLAST, 10, 2, EXTEND_BASEWISE)),
    ("blastn-short", [400], {}, (SMALL, 7, 1, EXTEND_DIRECT)),
    ("blastn", [100], {"word_size": 9}, (SMALL, 7, 3, EXTEND_SMALL)),
    ("blastn", [17000], {"word_size": 8}, (STANDARD, 8, 1, EXTEND_DIRECT)),
    ("blastn", [17000], {"word_size": 12}, (MEGABLAST, 10, 3, EXTEND_BASEWISE)),
    ("blastn", [95000], {}, (MEGABLAST, 11, 1, EXTEND_DIRECT)),
]


@pytest.mark.parametrize("task,qlens,kw,expected", CASES)
def test_seeds_match_reference(task, qlens, kw, expected):
    rng = np.random.default_rng(len(qlens) * 1000 + qlens[0] + sum(kw.values()))
    batch, options, subjects = make_case(rng, qlens, [3001, 17, 2500, 999], task, **kw)
    table = build_lookup(batch, options)
    assert (table.kind, table.width, table.scan_step, choose_extend(table)) == expected
    packed, offsets, lengths = pack_chunks(subjects)
    seeds = find_seeds(table, packed, offsets, lengths)
    assert got_seeds(seeds) == reference_seeds(batch, table, subjects)
    assert len(seeds) > 0
    # BLAST's processing order: chunk, then the hit's subject offset
    key = seeds.chunk.astype(np.int64) * 2 ** 32 + seeds.hit_s
    assert (np.diff(key) >= 0).all()
    assert (seeds.s_first == seeds.s_off).all()


def test_megablast_chain_order_within_a_hit():
    rng = np.random.default_rng(11)
    unit = rng.integers(0, 4, 40).astype(np.uint8)
    q = np.concatenate([unit, rng.integers(0, 4, 5000).astype(np.uint8), unit])
    options = make_options("megablast", dust="no")
    batch = build_batch([Query("q", "", q, np.zeros(q.size, bool))], options)
    table = build_lookup(batch, options)
    assert table.kind == MEGABLAST
    subject = np.concatenate([rng.integers(0, 4, 36).astype(np.uint8), unit])
    packed, offsets, lengths = pack_chunks([subject])
    seeds = find_seeds(table, packed, offsets, lengths)
    for h in np.unique(seeds.hit_s):
        qs = seeds.q_off[seeds.hit_s == h] + (h - seeds.s_off[seeds.hit_s == h])
        assert (np.diff(qs) < 0).all()


def test_masked_query_seeds_slide_and_stay_in_table():
    """With a masked stretch, seeds covering it are dropped or slid right (s_TypeOfWord)."""
    rng = np.random.default_rng(12)
    q = rng.integers(0, 4, 600).astype(np.uint8)
    lower = np.zeros(600, bool)
    lower[300:310] = True
    options = make_options("megablast", dust="no", lcase_masking=True)
    batch = build_batch([Query("q", "", q, lower)], options)
    table = build_lookup(batch, options)
    subject = np.concatenate([rng.integers(0, 4, 50).astype(np.uint8), q[250:400]])
    packed, offsets, lengths = pack_chunks([subject])
    seeds = find_seeds(table, packed, offsets, lengths)
    assert len(seeds) > 0
    masked = set(range(1 + 300, 1 + 310))
    for qo, so, sf in zip(seeds.q_off, seeds.s_off, seeds.s_first):
        assert so >= sf
        assert not masked & set(range(qo, qo + 28))  # the W-seed avoids the masked letters


@pytest.mark.parametrize("length", [700, 6000])
def test_listed_at_is_the_tables_answer(length):
    """s_TypeOfWord's look-up (listed_at) says what the table says: q is listed under
    `word` exactly when words_of(word) holds q, for the query's own words (masked, ambiguous
    and near the contexts' ends included) and for others."""
    rng = np.random.default_rng(length)
    q = rng.integers(0, 4, length).astype(np.uint8)
    q[rng.integers(0, length, 5)] = 14
    lower = np.zeros(length, bool)
    lower[length // 3:length // 3 + 40] = True
    options = make_options("megablast", dust="no", lcase_masking=True)
    batch = build_batch([Query("q", "", q, lower), Query("r", "", q[:300], lower[:300])],
                        options)
    table = build_lookup(batch, options)
    assert table.check_masks
    q_bases = table.query_words[0].ctypes.data + WORD_PAD
    w = table.width
    seq = table.sequence
    listed = {}
    for word in {int("".join(str(int(c)) for c in seq[p:p + w]), 4)
                 for p in range(seq.size - w + 1) if (seq[p:p + w] < 4).all()}:
        for off in words_of(table, word):
            listed[int(off)] = word
    assert listed
    for off in range(-2, seq.size + 2):
        own = listed.get(off, -1)
        for word in {own, int(rng.integers(0, 4 ** w))}:
            if word >= 0:
                assert listed_at(table.listed_offsets, q_bases, word, off, w) == (own == word)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=40), st.integers(-5, 70))
def test_context_of_is_the_last_context_starting_at_or_before(starts, q):
    offsets = np.array(sorted(starts), dtype=np.int32)
    expected = max(0, int(np.searchsorted(offsets, q, side="right")) - 1)
    assert context_of(offsets, q) == expected


def test_per_offset_reads_are_the_computed_ones():
    """query_quads and offset_contexts, the mini-extensions' per-hit reads, give what
    query_quad and context_of compute at every offset (several contexts in one of
    offset_contexts' blocks, offsets before and past the query)."""
    rng = np.random.default_rng(13)
    batch, options, _ = make_case(rng, [37, 5, 120], [10], "blastn")
    sequence = batch.sequence.copy()
    sequence[rng.integers(1, sequence.size - 1, 6)] = 14
    quads = query_quads(sequence)
    assert [int(quads[i + QUAD_PAD]) for i in range(-QUAD_PAD, sequence.size)] == \
        [query_quad(sequence, i) for i in range(-QUAD_PAD, sequence.size)]
    contexts = offset_contexts(batch.context_offset, sequence.size)
    offsets = range(-3, sequence.size + 70)
    assert [context_at(contexts, batch.context_offset, q) for q in offsets] == \
        [context_of(batch.context_offset, q) for q in offsets]


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10 ** 6), st.sampled_from([0, 1, 2, 6]))
def test_threads_do_not_change_seeds(seed, case):
    rng = np.random.default_rng(seed)
    task, qlens, kw, _ = CASES[case]
    batch, options, subjects = make_case(rng, qlens, [int(n) for n in rng.integers(1, 1500, 7)],
                                         task, n_plants=2, **kw)
    table = build_lookup(batch, options)
    packed, offsets, lengths = pack_chunks(subjects)
    one = find_seeds(table, packed, offsets, lengths, num_threads=1)
    two = find_seeds(table, packed, offsets, lengths, num_threads=2, spread=on_threads(2))
    assert one.equals(two)


@pytest.mark.parametrize("case", [3, 8])
def test_scan_resumed_when_its_buffer_fills(case):
    """scan_into stops when its output is full and goes on from there: the seeds, taken a few
    at a time, are scan_chunks' (a position's seeds are never split across two calls)."""
    rng = np.random.default_rng(case)
    task, qlens, kw, _ = CASES[case]
    batch, options, subjects = make_case(rng, qlens, [900, 1400, 700], task, **kw)
    table = build_lookup(batch, options)
    packed, offsets, lengths = pack_chunks(subjects)
    args = _table_args(table) + (packed, offsets, lengths)
    whole = scan_chunks(*args, 0, len(subjects))
    out = np.zeros((SEED_FIELDS, 3), dtype=np.int32)
    taken, c, s = [], 0, 0
    while c < len(subjects):
        n, c, s = scan_into(*args, c, s, len(subjects), out, 0)
        assert n > 0 or c == len(subjects)
        taken.append(out[:, :n].copy())
    assert whole[0].size > 3
    np.testing.assert_array_equal(np.concatenate(taken, axis=1), np.stack(whole))
