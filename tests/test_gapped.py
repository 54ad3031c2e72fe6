"""Preliminary greedy stage on one chunk."""

from types import SimpleNamespace

import numpy as np

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
