"""Ungapped extension and diagonal bookkeeping against a slow reference written from the
spec; the hits are the same on any number of threads, and the diagonal hash's stretches
between resets, extended in parallel, give the sequential hits and final hash."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.alphabet import score_matrix
from gblastn.lookup import build_lookup
from gblastn.pools import on_threads
from gblastn.scan.cpu import find_seeds
from gblastn.ungapped import (HASH_OFFSET_LIMIT, DiagonalHash, extend_seeds, hash_parts,
                              nucl_score_table, query_bytes, uses_diag_hash)

from test_scan import make_case, pack_chunks


def ref_exact(seq, subj, q, s, X, M):
    """Left from q-1 (running sum, best start moves when the sum turns positive, stop below
    -X), then right from q with the drop limit max(-X, -score)."""
    score, run, q_beg = 0, 0, q
    k = 1
    while q - k >= 1 and s - k >= 0:
        run += M[seq[q - k], subj[s - k]]
        if run > 0:
            q_beg, score, run = q - k, score + run, 0
        elif run < -X:
            break
        k += 1
    run, q_end, limit, k = 0, q, -X, 0
    while q + k < seq.size - 1 and s + k < subj.size:
        run += M[seq[q + k], subj[s + k]]
        if run > 0:
            q_end, score, run = q + k + 1, score + run, 0
            limit = max(-score, -X)
        elif run < limit:
            break
        k += 1
    return q_beg, s - (q - q_beg), q_end - q_beg, score


def ref_approx(seq, subj, q, s, X, reduced, s_match_end, M, table):
    pad = (4 - s % 4) % 4
    qe, se = q + pad, s + pad
    score, run, new_q = 0, 0, qe
    for i in range(min(qe - 1, se) // 4):
        qi, si = qe - 4 * i, se - 4 * i
        qb = ((int(seq[qi - 4]) << 6) | (int(seq[qi - 3]) << 4) | (int(seq[qi - 2]) << 2) | int(seq[qi - 1])) & 255
        sb = (int(subj[si - 4]) << 6) | (int(subj[si - 3]) << 4) | (int(subj[si - 2]) << 2) | int(subj[si - 1])
        run += table[qb ^ sb]
        if run > 0:
            new_q, score, run = qi - 4, score + run, 0
        if run < -X:
            break
    q_start = new_q
    s_start = se - (qe - q_start)
    run, new_q = 0, qe
    for i in range(min(seq.size - 1 - qe, subj.size - se) // 4):
        qi, si = qe + 4 * i, se + 4 * i
        qb = ((int(seq[qi]) << 6) | (int(seq[qi + 1]) << 4) | (int(seq[qi + 2]) << 2) | int(seq[qi + 3])) & 255
        sb = (int(subj[si]) << 6) | (int(subj[si + 1]) << 4) | (int(subj[si + 2]) << 2) | int(subj[si + 3])
        run += table[qb ^ sb]
        if run > 0:
            new_q, score, run = qi + 3, score + run, 0
        if run < -X:
            break
    if score >= reduced:
        return ref_exact(seq, subj, q, s, X, M)
    return q_start, s_start, max(s_match_end - s_start, new_q - q_start + 1), score


def reference_hits(batch, seeds, subjects, W, X, cutoff, reduced, reward, penalty):
    """One-hit diagonal rule with an exact per-diagonal last_hit (a dict)."""
    M = score_matrix(reward, penalty)
    table = nucl_score_table(reward, penalty)
    out = []
    for c, subj in enumerate(subjects):
        last = {}
        pick = np.flatnonzero(seeds.chunk == c)
        for i in pick:
            q, s, first = int(seeds.q_off[i]), int(seeds.s_off[i]), int(seeds.s_first[i])
            if first < last.get(s - q, 0):
                continue
            ctx = batch.context_of(q)
            if W < 11:
                hit = ref_exact(batch.sequence, subj, q, s, X[ctx], M)
            else:
                hit = ref_approx(batch.sequence, subj, q, s, X[ctx], reduced[ctx], s + W, M, table)
            if hit[3] >= cutoff[ctx]:
                out.append((c, -hit[3], hit[1], -hit[2], hit[0]))
                last[s - q] = hit[1] + hit[2]
            else:
                last[s - q] = s + W
    return sorted(out)


@pytest.mark.parametrize("task,qlens,xdrop,cutoff", [
    ("blastn-short", [300, 200], 11, 13),
    ("blastn", [700], 22, 25),
    ("megablast", [900, 400], 11, 13),
    ("megablast", [5000], 11, 13),
    ("megablast", [3000, 3000], 11, 13),  # query > 8000 letters: diagonal hash
])
def test_extension_matches_reference(task, qlens, xdrop, cutoff):
    rng = np.random.default_rng(sum(qlens) + xdrop)
    batch, options, subjects = make_case(rng, qlens, [2000, 30, 1500, 3333], task, n_plants=8)
    table = build_lookup(batch, options)
    packed, offsets, lengths = pack_chunks(subjects)
    seeds = find_seeds(table, packed, offsets, lengths)
    nc = batch.num_contexts
    X = np.full(nc, xdrop, np.int32)
    cut = np.full(nc, cutoff, np.int32)
    red = (0.8 * cut).astype(np.int32)
    hits = extend_seeds(seeds, table, packed, offsets, lengths, X, cut, red,
                        options.reward, options.penalty)
    got = list(zip(hits.chunk.tolist(), (-hits.score).tolist(), hits.s_start.tolist(),
                   (-hits.length).tolist(), hits.q_start.tolist()))
    assert got == sorted(got)  # Blast_InitHitListSortByScore per chunk
    expected = reference_hits(batch, seeds, subjects, options.word_size, X, cut, red,
                              options.reward, options.penalty)
    if uses_diag_hash(table):
        # the hash may forget a diagonal (stale-cell reuse): never fewer hits than the array
        assert set(expected) <= set(got)
    else:
        assert got == expected
    assert len(got) > 0


def test_planted_identity_gives_one_hit():
    rng = np.random.default_rng(21)
    q = rng.integers(0, 4, 1000).astype(np.uint8)
    from gblastn.options import make_options
    from gblastn.query import Query, build_batch
    options = make_options("megablast", dust="no")
    batch = build_batch([Query("q", "", q, np.zeros(q.size, bool))], options)
    table = build_lookup(batch, options)
    subject = np.concatenate([rng.integers(0, 4, 333).astype(np.uint8), q[200:700],
                              rng.integers(0, 4, 400).astype(np.uint8)])
    packed, offsets, lengths = pack_chunks([subject])
    seeds = find_seeds(table, packed, offsets, lengths)
    assert len(seeds) > 10  # many seeds on one diagonal ...
    nc = batch.num_contexts
    hits = extend_seeds(seeds, table, packed, offsets, lengths, np.full(nc, 11),
                        np.full(nc, 13), np.full(nc, 10), 1, -2)
    main = hits.score >= 450
    assert main.sum() == 1  # ... one extension
    i = int(np.flatnonzero(main)[0])
    assert hits.q_start[i] <= 1 + 200 and hits.s_start[i] - hits.q_start[i] == 333 - 201
    assert hits.length[i] >= 500


def test_threads_do_not_change_hits():
    rng = np.random.default_rng(5)
    batch, options, subjects = make_case(rng, [800], [int(n) for n in rng.integers(30, 900, 9)],
                                         "blastn", n_plants=3)
    table = build_lookup(batch, options)
    packed, offsets, lengths = pack_chunks(subjects)
    seeds = find_seeds(table, packed, offsets, lengths)
    nc = batch.num_contexts
    args = (np.full(nc, 22), np.full(nc, 25), np.full(nc, 20), 2, -3)
    one = extend_seeds(seeds, table, packed, offsets, lengths, *args, num_threads=1)
    two = extend_seeds(seeds, table, packed, offsets, lengths, *args, num_threads=3,
                       spread=on_threads(3))
    for f in ("chunk", "q_start", "s_start", "length", "score", "seed_q", "seed_s"):
        assert np.array_equal(getattr(one, f), getattr(two, f))


@pytest.mark.parametrize("threads", [1, 4])
def test_hash_parts_side_by_side_give_the_one_hash_hits(threads):
    """The diagonal hash's buckets in parts, each part's seeds extended on their own (on
    threads), give the hits of one hash walked through every seed, across the hash's resets
    (every HASH_OFFSET_LIMIT letters) and carried from one call to the next as from one
    volume to the next."""
    rng = np.random.default_rng(8)
    batch, options, subjects = make_case(rng, [5000, 4000], [int(n) for n in
                                         rng.integers(400, 3000, 12)], "megablast", n_plants=9)
    table = build_lookup(batch, options)
    assert uses_diag_hash(table)
    packed, offsets, lengths = pack_chunks(subjects)
    seeds = find_seeds(table, packed, offsets, lengths)
    # chunks said to be long enough for resets; the letters past the real ones are random
    # and the same for both runs
    packed = np.concatenate([packed, rng.integers(0, 256, 1 << 16).astype(np.uint8)])
    claimed = np.full(lengths.size, HASH_OFFSET_LIMIT // 3, np.int32)
    nc = batch.num_contexts
    args = (np.full(nc, 11), np.full(nc, 13), np.full(nc, 10), 1, -2)
    half = lengths.size // 2
    first, second = seeds.of_chunks(0, half), seeds.of_chunks(half, lengths.size)
    found = []
    for state in (DiagonalHash(parts=1), DiagonalHash(hash_parts(3)), DiagonalHash()):
        state.offset = HASH_OFFSET_LIMIT // 2  # a first volume leaves the hash mid-stretch
        found.append([extend_seeds(part, table, packed, offsets[lo:hi], claimed[lo:hi],
                                   *args, num_threads=threads, diag_hash=state,
                                   spread=on_threads(threads if state.parts[1:] else 1))
                      for part, lo, hi in ((first, 0, half), (second, half, lengths.size))])
    one = found[0]
    assert len(one[0]) > 0 and len(one[1]) > 0
    for parts in found[1:]:
        for a, b in zip(one, parts):
            for f in ("chunk", "q_start", "s_start", "length", "score", "seed_q", "seed_s"):
                assert np.array_equal(getattr(a, f), getattr(b, f))


def test_hash_parts_one_a_thread():
    """A part a thread, a power of two up to SEARCH_HASH_PARTS; one up to two threads."""
    assert [hash_parts(t) for t in (1, 2, 3, 8, 16, 100)] == [1, 1, 4, 8, 8, 8]


def test_an_emptied_hash_keeps_its_kind_and_takes_an_offset_everywhere():
    """A shard's replay starts an empty hash of the batch's kind at a subject's offset: the
    CPU's parts and the device's chains alike (window, lanes, offset)."""
    used = DiagonalHash(4, 40, 32)
    used.offset = 12345
    fresh = used.emptied()
    assert len(fresh.parts) == 4 and fresh.chains.window == 40 and fresh.chains.lanes == 32
    assert fresh.offset == fresh.chains.offset == 40
    assert fresh.chains.count.size == 512 * 32 and not fresh.chains.count.any()
    fresh.offset = 777
    assert [part.offset for part in fresh.parts] == [777] * 4 and fresh.chains.offset == 777


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 15), min_size=0, max_size=40))
def test_query_bytes_are_the_packed_groups(letters):
    """query_bytes holds BLAST's packed group of four letters at each offset (ambiguity
    codes spilling into the neighbours' bits), and 0 where fewer than four letters are
    left."""
    sequence = np.array(letters, dtype=np.uint8)
    got = query_bytes(sequence)
    assert got.shape == sequence.shape
    for i in range(sequence.size):
        want = 0
        if i + 4 <= sequence.size:
            want = ((int(sequence[i]) << 6) | (int(sequence[i + 1]) << 4)
                    | (int(sequence[i + 2]) << 2) | int(sequence[i + 3])) & 0xFF
        assert got[i] == want


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3000), st.sampled_from([1, 2, 64]), st.integers(0, 2**31 - 1),
       st.booleans())
def test_seeds_grouped_by_hash_part_in_seed_order(n, parts, seed, side_by_side):
    """by_hash_part is a stable partition of the seeds by their diagonal's hash part,
    whether its ranges run one after the other or side by side in any order (ranges of 50
    seeds here, not PARTITION_SEEDS)."""
    from unittest import mock

    from gblastn.ungapped import HASH_BUCKETS, by_hash_part

    rng = np.random.default_rng(seed)
    q_off = rng.integers(0, 20_000, n).astype(np.int32)
    s_off = rng.integers(0, 5_000_000, n).astype(np.int32)
    backwards = lambda function, count: [function(k) for k in reversed(range(count))]
    with mock.patch("gblastn.ungapped.PARTITION_SEEDS", 50):
        order, bounds = by_hash_part(q_off, s_off, parts, backwards if side_by_side else None)
    part = ((s_off.astype(np.int64) - q_off) & (HASH_BUCKETS - 1)) & (parts - 1)
    assert np.array_equal(order, np.argsort(part, kind="stable"))
    assert np.array_equal(bounds, np.concatenate([[0], np.cumsum(np.bincount(part, minlength=parts))]))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2000), st.integers(1, 30), st.integers(0, 2**31 - 1))
def test_initial_hits_sorted_as_blast_sorts_them(n, chunks, seed):
    """sort_initial_hits gives, per chunk, score desc, s_start asc, length desc, q_start asc,
    ties in the order found (as numpy's lexsort of those keys), in arrays of its own; few
    distinct values make many ties."""
    from gblastn.ungapped import InitialHits, sort_initial_hits

    rng = np.random.default_rng(seed)
    chunk = rng.integers(0, chunks, n)  # in order, as the stage finds hits, or not
    fields = [np.sort(chunk) if seed % 2 else chunk] + [rng.integers(0, 6, n) for _ in range(4)] \
        + [np.arange(n), rng.integers(0, 1000, n)]
    # views of a larger buffer, as a slice's hits are of the stage's: the sorted hits must
    # not keep it
    buffer = np.zeros((7, n + 100), dtype=np.int32)
    buffer[:, :n] = fields
    hits = InitialHits(*buffer[:, :n])
    got = sort_initial_hits(hits)
    assert all(getattr(got, f).base is not buffer for f in ("chunk", "seed_s"))
    want = np.lexsort((hits.q_start, -hits.length.astype(np.int64), hits.s_start,
                       -hits.score.astype(np.int64), hits.chunk))
    for name in ("chunk", "q_start", "s_start", "length", "score", "seed_q", "seed_s"):
        assert np.array_equal(getattr(got, name), getattr(hits, name)[want]), name
