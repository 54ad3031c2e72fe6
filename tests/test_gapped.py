"""Preliminary greedy stage on one chunk."""

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


def many_hits_case(seed: int):
    """A 20 kb query, its copy with substitutions and indels inside a subject, and 300
    initial hits near the alignment's drifting diagonal (and a few off it), in score order:
    most are extended again, some fall inside HSPs found before them."""
    from golden import mutate, random_dna

    rng = np.random.default_rng(seed)
    query = random_dna(rng, 20_000)
    subject = np.concatenate([random_dna(rng, 500), mutate(rng, query, 0.03, 0.01),
                              random_dna(rng, 500)])
    opts = make_options("megablast", dust="no")
    batch = build_batch([Query("q", "q", encode_blastna(query.tobytes().decode()),
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
    from gblastn.tasks import TaskPool

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
