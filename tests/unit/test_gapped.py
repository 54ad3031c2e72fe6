"""The preliminary gapped stage (gblastn.gapped): a hit's greedy extension and BLAST's
containment of later hits, extensions spread over threads or made ahead (as the GPU makes
them) keeping the serial loop's rows, and whole chunks extended in one call."""

from types import SimpleNamespace

import numpy as np
import pytest

from gblastn.alphabet import encode_blastna, pack_2bit
from gblastn.gapped import prelim_gapped
from gblastn.options import make_options
from gblastn.query import Query, build_batch


def test_one_hit_extends_and_duplicate_is_contained():
    rng = np.random.default_rng(11)
    q = "".join(rng.choice(list("ACGT"), 300))
    s = "".join(rng.choice(list("ACGT"), 50)) + q[:150] + q[151:] + "".join(rng.choice(list("ACGT"), 50))
    opts = make_options("megablast", dust="no")
    batch = build_batch([Query("q", "q", encode_blastna(q), np.zeros(len(q), bool))], opts)
    subj = encode_blastna(s)
    stats = SimpleNamespace(gapped_cutoff=np.array([20, 20]), gap_xdrop=13, gap_xdrop_final=54)
    off = int(batch.context_offset[0])
    hsps = prelim_gapped(np.array([off + 10, off + 20]), np.array([60, 70]), np.array([100, 40]),
                         np.array([100, 40]), batch, pack_2bit(subj), len(s), stats, opts)
    assert len(hsps) == 1
    assert (hsps.q_start[0], hsps.q_end[0], hsps.s_start[0], hsps.s_end[0]) == (0, 300, 50, 349)
    assert hsps.score[0] == 299 - 3


def many_hits_case(seed: int, ambiguous: bool = False):
    """A 20 kb query, its copy with substitutions and indels inside a subject, and 300
    initial hits near the alignment's drifting diagonal (and a few off it), in score order:
    most are extended again, some fall inside HSPs found before them. `ambiguous` puts N
    letters into the query (the subject copy keeps bases there)."""
    from golden import mutate, random_dna

    rng = np.random.default_rng(seed)
    query = random_dna(rng, 20_000)
    subject = np.concatenate([random_dna(rng, 500), mutate(rng, query, 0.03, 0.01),
                              random_dna(rng, 500)])
    letters = query.copy()
    if ambiguous:
        letters[rng.integers(0, query.size, 60)] = ord("N")
    opts = make_options("megablast", dust="no")
    batch = build_batch([Query("q", "q", encode_blastna(letters.tobytes().decode()),
                               np.zeros(query.size, bool))], opts)
    q = rng.integers(0, query.size - 40, 300)
    s = np.clip(q + 500 + rng.integers(-150, 150, q.size), 0, subject.size - 40)
    score = rng.integers(28, 200, q.size)
    order = np.argsort(-score, kind="stable")
    off = int(batch.context_offset[0])
    stats = SimpleNamespace(gapped_cutoff=np.array([30, 30]), gap_xdrop=13)
    subj = encode_blastna(subject.tobytes().decode())
    return (off + q[order], s[order], np.full(q.size, 32), score[order], batch,
            pack_2bit(subj), subj.size, stats, opts)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_extensions_spread_over_threads_keep_the_serial_rows(seed, monkeypatch):
    from gblastn import gapped
    from gblastn.gapped import extend_hits
    from gblastn.pools import TaskPool

    case = many_hits_case(seed)
    serial_rows, serial_origin = extend_hits(*case)
    assert 1 < len(serial_rows) < case[0].size  # some hits kept, some contained
    backwards = lambda function, count: [function(k) for k in reversed(range(count))]
    with TaskPool(4) as pool:
        # in blocks from the first hit on, or once the alignments span 50 kb
        for heavy in (0, 50_000):
            monkeypatch.setattr(gapped, "HEAVY_LETTERS", heavy)
            for spread in (pool.spread, backwards):
                rows, origin = extend_hits(*case, spread=spread)
                assert np.array_equal(rows, serial_rows)
                assert np.array_equal(origin, serial_origin)


def extensions_on_cpu(q_start, s_start, length, score, batch, packed, chunk_length, stats,
                      options) -> np.ndarray:
    """Every hit's greedy extension as the gapped stage makes it, in the layout of
    ExtensionsAhead.extensions (all marked made)."""
    from gblastn.gapped import GAPPED_FIELDS, _greedy_from_hit, hit_contexts

    n = len(q_start)
    out = np.zeros((n, GAPPED_FIELDS + 1), dtype=np.int64)
    found = np.zeros(GAPPED_FIELDS, dtype=np.int64)
    args = (np.asarray(q_start, dtype=np.int64), np.asarray(s_start, dtype=np.int64),
            np.asarray(length, dtype=np.int64), hit_contexts(q_start, batch),
            np.asarray(batch.context_offset, dtype=np.int64),
            np.asarray(batch.context_length, dtype=np.int64), batch.sequence,
            batch.query_words, packed, chunk_length, int(stats.gap_xdrop), options.reward,
            options.penalty, options.gapopen, options.gapextend)
    for i in range(n):
        _greedy_from_hit(i, found, *args)
        out[i, :GAPPED_FIELDS] = found
        out[i, GAPPED_FIELDS] = 1
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_extensions_made_ahead_keep_the_rows(seed):
    """Extensions made ahead (as a GPU makes them) give the rows of extending in order; hits
    left undone are extended on the CPU."""
    from gblastn.gapped import GAPPED_FIELDS, extend_hits

    case = many_hits_case(seed)
    rows, origin = extend_hits(*case)
    ahead = extensions_on_cpu(*case)
    undone = ahead.copy()
    undone[::3, GAPPED_FIELDS] = 0
    undone[::3, :GAPPED_FIELDS] = -1  # never read
    for extensions in (ahead, undone):
        got_rows, got_origin = extend_hits(*case, extensions=extensions)
        assert np.array_equal(got_rows, rows)
        assert np.array_equal(got_origin, origin)


def test_chunks_in_one_call_give_each_chunks_rows():
    """extend_chunks_given runs several chunks' hits in one compiled call: each chunk's rows
    and origins are those of extend_hits on that chunk alone."""
    from gblastn.gapped import GAPPED_FIELDS, extend_chunks_given, extend_hits, hit_contexts

    q_start, s_start, length, score, batch, packed, chunk_length, stats, opts = \
        many_hits_case(4)
    ahead = extensions_on_cpu(q_start, s_start, length, score, batch, packed, chunk_length,
                              stats, opts)
    ahead[::5, GAPPED_FIELDS] = 0  # some left to the CPU
    # three chunks of the same letters, each with a third of the hits (in score order)
    bounds = np.array([0, 90, 200, 300], dtype=np.int64)
    buffer = np.concatenate([packed] * 3)
    byte_offset = np.arange(3, dtype=np.int64) * packed.size
    as64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)
    chunks = np.array([0, 2], dtype=np.int64)
    rows, origin, counts = extend_chunks_given(
        chunks, bounds, ahead, as64(q_start), as64(s_start), as64(length), as64(score),
        hit_contexts(q_start, batch), as64(batch.context_offset), as64(batch.context_length),
        batch.sequence, batch.query_words, buffer, byte_offset,
        np.full(3, chunk_length, dtype=np.int64), as64(stats.gapped_cutoff),
        int(stats.gap_xdrop), opts.reward, opts.penalty, opts.gapopen, opts.gapextend,
        opts.min_diag_separation)
    at = 0
    for c, count in zip(chunks, counts):
        lo, hi = bounds[c], bounds[c + 1]
        want_rows, want_origin = extend_hits(q_start[lo:hi], s_start[lo:hi], length[lo:hi],
                                             score[lo:hi], batch, packed, chunk_length, stats,
                                             opts, extensions=ahead[lo:hi])
        assert len(want_rows) > 0
        assert np.array_equal(rows[at:at + count], want_rows)
        assert np.array_equal(origin[at:at + count], want_origin)
        at += count
    assert at == len(rows)


def dp_extensions_on_cpu(q_start, s_start, length, score, seed_q, seed_s, batch, packed,
                         chunk_length, stats, options) -> np.ndarray:
    """Every hit's DP extension (dynprog.prelim_dp_extend) in the layout of
    ExtensionsAhead.extensions, all marked made."""
    from gblastn.alphabet import score_matrix
    from gblastn.dynprog import prelim_dp_extend
    from gblastn.gapped import GAPPED_FIELDS, hit_contexts

    matrix = score_matrix(options.reward, options.penalty).astype(np.int64)
    out = np.ones((len(q_start), GAPPED_FIELDS + 1), dtype=np.int64)
    for i, ctx in enumerate(hit_contexts(q_start, batch)):
        base = int(batch.context_offset[ctx])
        query = batch.sequence[base:base + int(batch.context_length[ctx])]
        out[i, :GAPPED_FIELDS] = prelim_dp_extend(
            query, packed, chunk_length, int(seed_q[i]) - base, int(seed_s[i]),
            int(s_start[i]), int(length[i]), int(score[i]), matrix, options.gapopen,
            options.gapextend, int(stats.gap_xdrop))
    return out


def test_dp_chunks_in_one_call_give_each_chunks_rows():
    """extend_chunks_dp_given runs several chunks' hits through the DP's in-order pass in
    one compiled call, given their extensions made ahead (some left to the CPU): each
    chunk's rows and origins are those of extending that chunk's hits alone on the CPU."""
    from gblastn.gapped import GAPPED_FIELDS, extend_chunks_dp_given, extend_hits, hit_contexts
    from gblastn.alphabet import score_matrix

    q_start, s_start, length, score, batch, packed, chunk_length, stats, _ = many_hits_case(5)
    opts = make_options("blastn", dust="no")
    seed_q, seed_s = q_start + 11, s_start + 11
    hits = (q_start, s_start, length, score)
    ahead = dp_extensions_on_cpu(*hits, seed_q, seed_s, batch, packed, chunk_length, stats,
                                 opts)
    ahead[::5, GAPPED_FIELDS] = 0  # some left to the CPU
    ahead[::5, :GAPPED_FIELDS] = -1  # never read
    bounds = np.array([0, 90, 200, 300], dtype=np.int64)
    as64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)
    chunks = np.array([0, 2], dtype=np.int64)
    rows, origin, counts = extend_chunks_dp_given(
        chunks, bounds, ahead, *map(as64, hits), as64(seed_q), as64(seed_s),
        hit_contexts(q_start, batch), as64(batch.context_offset), as64(batch.context_length),
        batch.sequence, np.concatenate([packed] * 3),
        np.arange(3, dtype=np.int64) * packed.size, np.full(3, chunk_length, dtype=np.int64),
        as64(stats.gapped_cutoff), int(stats.gap_xdrop),
        as64(score_matrix(opts.reward, opts.penalty)), opts.gapopen, opts.gapextend,
        opts.min_diag_separation)
    at = 0
    for c, count in zip(chunks, counts):
        part = slice(bounds[c], bounds[c + 1])
        want_rows, want_origin = extend_hits(*(a[part] for a in hits), batch, packed,
                                             chunk_length, stats, opts, seed_q[part],
                                             seed_s[part])
        assert len(want_rows) > 0
        assert np.array_equal(rows[at:at + count], want_rows)
        assert np.array_equal(origin[at:at + count], want_origin)
        at += count
    assert at == len(rows)
