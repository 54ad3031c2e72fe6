"""Traceback: edit scripts consistent with coordinates; golden check against blastn."""

import shutil
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest

from gblastn.alphabet import decode_blastna, encode_blastna, pack_2bit, score_matrix
from gblastn.gapped import prelim_gapped
from gblastn.options import make_options
from gblastn.query import Query, build_batch
from gblastn.traceback import traceback_subject


def _pair(seed):
    rng = np.random.default_rng(seed)
    q = "".join(rng.choice(list("ACGT"), 800))
    out = []
    for ch in q[100:700]:
        r = rng.random()
        if r < 0.04:
            out.append("ACGT"[rng.integers(4)])
        elif r < 0.05:
            continue
        elif r < 0.06:
            out += [ch, "ACGT"[rng.integers(4)]]
        elif r < 0.065:
            out.append("N" * int(rng.integers(1, 8)))
        elif r < 0.07:
            out.append("RYKMSWBDHV"[rng.integers(10)])
        else:
            out.append(ch)
    flank = lambda: "".join(rng.choice(list("ACGT"), 300))  # noqa: E731
    return q, flank() + "".join(out) + flank()


def _trace(q, s, start):
    opts = make_options("megablast", dust="no")
    batch = build_batch([Query("q", "q", encode_blastna(q), np.zeros(len(q), bool))], opts)
    subj = encode_blastna(s)
    stats = SimpleNamespace(gapped_cutoff=np.array([20, 20]), gap_xdrop=13, gap_xdrop_final=54)
    qi = next(i for i in range(start, len(q) - 28, 10) if s.find(q[i:i + 28]) >= 0)
    sj = s.find(q[qi:qi + 28])
    off = int(batch.context_offset[0])
    pre = prelim_gapped(np.array([off + qi]), np.array([sj]), np.array([28]), np.array([28]),
                        batch, pack_2bit(np.where(subj > 3, 0, subj)), len(s), stats, opts)
    return batch, subj, traceback_subject(pre, batch, subj, stats, opts)


def _btop(batch, subj, tb, i):
    qq = batch.sequence[batch.context_offset[tb.context[i]]:]
    qp, sp, run, parts = int(tb.q_start[i]), int(tb.s_start[i]), 0, []
    for op, n in zip(tb.ops[tb.op_start[i]:tb.op_start[i + 1]], tb.op_len[tb.op_start[i]:tb.op_start[i + 1]]):
        for _ in range(int(n)):
            if op == 0:
                x, y = qq[qp], subj[sp]
                qp, sp = qp + 1, sp + 1
                if x == y:
                    run += 1
                    continue
                c = decode_blastna([x]) + decode_blastna([y])
            elif op == 1:
                c, sp = "-" + decode_blastna([subj[sp]]), sp + 1
            else:
                c, qp = decode_blastna([qq[qp]]) + "-", qp + 1
            if run:
                parts.append(str(run))
                run = 0
            parts.append(c)
    if run:
        parts.append(str(run))
    assert qp == tb.q_end[i] and sp == tb.s_end[i]
    return "".join(parts)


def _rescore(batch, subj, tb, i):
    m = score_matrix(1, -2)
    qq = batch.sequence[batch.context_offset[tb.context[i]]:]
    qp, sp, total = int(tb.q_start[i]), int(tb.s_start[i]), 0
    for op, n in zip(tb.ops[tb.op_start[i]:tb.op_start[i + 1]], tb.op_len[tb.op_start[i]:tb.op_start[i + 1]]):
        if op == 0:
            total += 2 * int(m[qq[qp:qp + n], subj[sp:sp + n]].sum())
            qp, sp = qp + n, sp + n
        else:
            total -= 5 * int(n)
            qp, sp = (qp + n, sp) if op == 2 else (qp, sp + n)
    return total // 2


def test_scripts_and_scores_consistent():
    q, s = _pair(2)
    batch, subj, tb = _trace(q, s, 0)
    assert len(tb) >= 1
    for i in range(len(tb)):
        _btop(batch, subj, tb, i)
        assert _rescore(batch, subj, tb, i) == tb.score[i]


@pytest.mark.golden
@pytest.mark.skipif(shutil.which("blastn") is None, reason="needs NCBI blastn")
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_against_blastn(tmp_path, seed):
    q, s = _pair(seed)
    (tmp_path / "q.fa").write_text(">q\n" + q + "\n")
    (tmp_path / "s.fa").write_text(">s\n" + s + "\n")
    out = subprocess.run(["blastn", "-task", "megablast", "-dust", "no", "-query",
                          str(tmp_path / "q.fa"), "-subject", str(tmp_path / "s.fa"), "-outfmt",
                          "6 qstart qend sstart send score btop"],
                         capture_output=True, text=True, check=True).stdout.split("\n")[0].split("\t")
    batch, subj, tb = _trace(q, s, 200)
    mine = [str(tb.q_start[0] + 1), str(tb.q_end[0]), str(tb.s_start[0] + 1), str(tb.s_end[0]),
            str(tb.score[0]), _btop(batch, subj, tb, 0)]
    assert mine == out
