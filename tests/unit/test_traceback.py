"""The traceback (gblastn.traceback): edit scripts consistent with coordinates and scores, a
golden check against blastn, tracebacks whose greedy searches or DP alignments were made ahead
(as the GPU makes them) equal to those made in place, and a group's split into each task's
HSPs."""

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
                         capture_output=True, text=True, check=True).stdout
    from golden import assert_blastn_found_hits
    assert_blastn_found_hits(out)
    out = out.split("\n")[0].split("\t")
    batch, subj, tb = _trace(q, s, 200)
    mine = [str(tb.q_start[0] + 1), str(tb.q_end[0]), str(tb.s_start[0] + 1), str(tb.s_end[0]),
            str(tb.score[0]), _btop(batch, subj, tb, 0)]
    assert mine == out


def tails_on_cpu(hsps, batch, subject, stats, options):
    """The greedy traceback's searches of `hsps` (in score order) made on the CPU, in the
    layout of Hsps.ahead and Hsps.ahead_runs (as GpuBackend.greedy_tails gives them): each
    direction's walked-back edit runs packed as (count << RUN_COUNT_SHIFT | op), where both
    fit."""
    from gblastn.dynprog import adjust_subject_range, gapped_start_nucl
    from gblastn.greedy import greedy_one_way
    from gblastn.hsp import hsp_rows, score_order
    from gblastn.layouts import RUN_COUNT_SHIFT, SCRIPT_RUNS, TAIL_FIELDS

    rows = hsp_rows(hsps)[score_order(hsps)]
    out = np.zeros((rows.shape[0], TAIL_FIELDS + 1), dtype=np.int64)
    runs = np.zeros((rows.shape[0], 2 * SCRIPT_RUNS), dtype=np.uint32)
    none = np.zeros(0, dtype=np.uint8)
    scoring = (int(stats.gap_xdrop_final), options.reward, options.penalty, 0, 0, True, -1)
    for i, (ctx, qs, qe, ss, se, _, qg, sg) in enumerate(rows.tolist()):
        if qg == 0 and sg == 0:
            continue
        base = int(batch.context_offset[ctx])
        length = int(batch.context_length[ctx])
        qg, sg = gapped_start_nucl(batch.sequence[base:base + length], subject, qs, qe, ss, se,
                                   qg, sg)
        shift, s_in, window = adjust_subject_range(sg, subject.size, qg, length)
        right = greedy_one_way(batch.sequence, none, none, base + qg, length - qg, subject,
                               shift + s_in, window - s_in, False, False, *scoring)
        left = greedy_one_way(batch.sequence, none, none, base + qg, qg, subject, shift + s_in,
                              s_in, False, True, *scoring)
        fit = max(right[9], left[9]) <= SCRIPT_RUNS
        for half, way in enumerate((right, left)):
            packed = (way[8][:way[9]].astype(np.uint32) << RUN_COUNT_SHIFT) | way[7][:way[9]]
            runs[i, half * SCRIPT_RUNS:half * SCRIPT_RUNS + way[9]] = packed if fit else 0
        out[i] = (qg, sg, right[1], left[1], shift + s_in - left[0], shift + s_in + right[0],
                  right[2], right[3], left[2], left[3], right[9] if fit else -1,
                  left[9] if fit else -1, 1)
    return out, runs


def traced_case(seed: int, task: str = "megablast"):
    """Six mutated pieces of a 6 kb query (substitutions and indels) apart in a subject, a
    hit at the start of each, extended: (preliminary HSPs, batch, query codes, subject
    letters, stats, options) for traceback, by `task`'s aligner."""
    from golden import mutate, random_dna

    from gblastn.gapped import extend_hits
    from gblastn.hsp import chunk_rows, hsps_from_rows

    rng = np.random.default_rng(seed)
    query = random_dna(rng, 6000)
    parts, q_hits, s_hits, at = [random_dna(rng, 300)], [], [], 300
    for _ in range(6):
        a = int(rng.integers(0, 5000))
        piece = np.concatenate([query[a:a + 30], mutate(rng, query[a + 30:a + 1000], 0.03, 0.01)])
        q_hits.append(a)
        s_hits.append(at)
        parts += [piece, random_dna(rng, 300)]
        at += piece.size + 300
    subject = encode_blastna(np.concatenate(parts).tobytes().decode())
    options = make_options(task, dust="no")
    batch = build_batch([Query("q", "q", encode_blastna(query.tobytes().decode()),
                               np.zeros(query.size, bool))], options)
    xdrops = (13, 54) if options.greedy else (30, 110)
    stats = SimpleNamespace(gapped_cutoff=np.array([30, 30]), gap_xdrop=xdrops[0],
                            gap_xdrop_final=xdrops[1],
                            lambdas=np.array([1.28, 1.28]), log_ks=np.log([0.46, 0.46]),
                            eff_searchsp=np.array([10 ** 9, 10 ** 9]), round_down=False)
    off = int(batch.context_offset[0])
    rows, _ = extend_hits(off + np.array(q_hits), np.array(s_hits), np.full(6, 30),
                          np.full(6, 30), batch, pack_2bit(subject), subject.size, stats, options)
    hsps = hsps_from_rows(chunk_rows(np.ascontiguousarray(rows, dtype=np.int64), 0, True))
    return hsps, batch, batch.queries[0].codes, subject, stats, options


@pytest.mark.parametrize("seed", [1, 2])
def test_searches_made_ahead_give_the_same_traceback(seed):
    """Taking each greedy alignment's edit runs from the searches made ahead, or stopping
    each greedy traceback at the best distance found ahead, gives the same HSPs, scripts and
    counts; searches not made, or from another start point, are redone."""
    from gblastn.layouts import TAIL_FIELDS, TAIL_RUNS
    from gblastn.traceback import traceback_final

    hsps, batch, codes, subject, stats, options = traced_case(seed)
    assert len(hsps) == 6
    plain = traceback_final(hsps, batch, codes, subject, stats, options)
    ahead, runs = tails_on_cpu(hsps, batch, subject, stats, options)
    assert ahead[:, TAIL_FIELDS].all() and (ahead[:, TAIL_RUNS:TAIL_RUNS + 2] >= 1).all()
    searched = ahead.copy()
    searched[:, TAIL_RUNS:TAIL_RUNS + 2] = -1  # no runs: the CPU searches, to the distances given
    partly = ahead.copy()
    partly[::2, TAIL_FIELDS] = 0
    partly[::2, 2:4] = 0  # would stop at once, if read
    moved = ahead.copy()
    moved[1::2, 0] += 1
    moved[1::2, 2:4] = 0
    wrong = searched.copy()
    wrong[:, 2:4] = 0  # read: each alignment stops at its first mismatches
    garbled = runs.copy()
    garbled[:, 0] ^= 1  # read: the last run's operation changed
    for bad, bad_runs in ((wrong, runs), (ahead, garbled)):
        got = traceback_final(hsps, batch, codes, subject, stats, options, ahead=bad,
                              ahead_runs=bad_runs)
        assert not (np.array_equal(got.score, plain.score) and
                    np.array_equal(got.ops, plain.ops))
    for given in (ahead, searched, partly, moved):
        got = traceback_final(hsps, batch, codes, subject, stats, options, ahead=given,
                              ahead_runs=runs)
        for name in ("context", "q_start", "q_end", "s_start", "s_end", "score", "op_start",
                     "ops", "op_len", "evalue", "counts"):
            assert np.array_equal(getattr(got, name), getattr(plain, name)), name


def test_a_group_splits_into_each_tasks_hsps():
    """traceback_group's split: each task's rows, its edit scripts counted from its first
    run, and its E-values, bit scores and counts; tasks without HSPs among them."""
    from gblastn.traceback import _split_by_task

    rng = np.random.default_rng(3)
    sizes = rng.integers(0, 6, 200)
    sizes[::7] = 0
    task_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(task_start[-1])
    rows = rng.integers(-5, 1000, (n, 9)).astype(np.int64)
    op_start = np.concatenate([[0], np.cumsum(rng.integers(1, 6, n))]).astype(np.int64)
    ops = rng.integers(0, 3, op_start[-1]).astype(np.uint8)
    op_len = rng.integers(1, 50, op_start[-1]).astype(np.int32)
    evalue, bitscore = rng.random(n), rng.random(n)
    counts = rng.integers(0, 100, (n, 4))
    split = _split_by_task(task_start, rows, op_start, ops, op_len, evalue, bitscore, counts)
    assert len(split) == sizes.size
    names = ("context", "q_start", "q_end", "s_start", "s_end", "score", "q_gapped_start",
             "s_gapped_start")
    for k, hsps in enumerate(split):
        a, b = task_start[k], task_start[k + 1]
        for column, name in enumerate(names):
            field = getattr(hsps, name)
            assert field.dtype == np.int32 and field.flags.c_contiguous
            assert np.array_equal(field, rows[a:b, column])
        assert np.array_equal(hsps.op_start, op_start[a:b + 1] - op_start[a])
        assert np.array_equal(hsps.ops, ops[op_start[a]:op_start[b]])
        assert np.array_equal(hsps.op_len, op_len[op_start[a]:op_start[b]])
        assert np.array_equal(hsps.evalue, evalue[a:b])
        assert np.array_equal(hsps.bitscore, bitscore[a:b])
        assert np.array_equal(hsps.counts, counts[a:b])


def dp_tails_on_cpu(hsps, batch, subject, stats, options, rng):
    """The DP tracebacks of `hsps` (in score order) made on the CPU, as GpuBackend.dp_tails
    gives them: a TRACE_FIELDS row and a done flag per HSP, and the runs of all, each
    alignment's in a place of its own (shuffled, as the device's threads take room)."""
    from gblastn.dynprog import gapped_start_nucl, traceback_dp
    from gblastn.hsp import hsp_rows, score_order
    from gblastn.layouts import RUN_COUNT_SHIFT, TRACE_FIELDS

    rows = hsp_rows(hsps)[score_order(hsps)]
    out = np.zeros((rows.shape[0], TRACE_FIELDS + 1), dtype=np.int64)
    scripts = []
    matrix = score_matrix(options.reward, options.penalty).astype(np.int64)
    for i, (ctx, qs, qe, ss, se, _, qg, sg) in enumerate(rows.tolist()):
        base = int(batch.context_offset[ctx])
        letters = batch.sequence[base:base + int(batch.context_length[ctx])]
        qg, sg = gapped_start_nucl(letters, subject, qs, qe, ss, se, qg, sg)
        score, q0, q1, s0, s1, ops, lens, read_start, read_end = traceback_dp(
            letters, qg, subject, sg, matrix, options.gapopen, options.gapextend,
            int(stats.gap_xdrop_final))
        scripts.append((lens.astype(np.uint32) << RUN_COUNT_SHIFT) | ops)
        out[i, :10] = (qg, sg, score, 0, read_start, read_end, q0, q1, s0, s1)
        out[i, TRACE_FIELDS] = 1
    runs, at = [], 0
    for i in rng.permutation(len(scripts)):
        out[i, 10:12] = (at, scripts[i].size)
        runs.append(scripts[i])
        at += scripts[i].size
    return rows, out, np.concatenate(runs)


@pytest.mark.parametrize("task", ["dc-megablast", "blastn"])
def test_dp_alignments_made_ahead_give_the_same_traceback(task):
    """Taking each DP alignment made ahead (its runs gathered from anywhere in the launch's)
    gives the same HSPs, scripts and counts; alignments not made, or from another start
    point, are made in place; a wrong one made ahead would be taken."""
    from gblastn.layouts import TRACE_FIELDS, TRACE_RUNS, TRACE_SCORE, TRACE_START
    from gblastn.traceback import dp_tails_ahead, traceback_final

    hsps, batch, codes, subject, stats, options = traced_case(4, task)
    assert len(hsps) >= 4
    plain = traceback_final(hsps, batch, codes, subject, stats, options)
    rows, ahead, runs = dp_tails_on_cpu(hsps, batch, subject, stats, options,
                                        np.random.default_rng(0))
    [tails] = dp_tails_ahead(rows, ahead, runs, [rows.shape[0]])
    assert tails.runs.shape == (runs.size, 1) and tails.searches[0, TRACE_RUNS] == 0
    partly = tails.searches.copy()
    partly[::2, TRACE_FIELDS] = 0
    moved = tails.searches.copy()
    moved[1::2, TRACE_START] += 1
    for given in (tails.searches, partly, moved):
        got = traceback_final(hsps, batch, codes, subject, stats, options, ahead=given,
                              ahead_runs=tails.runs)
        for name in ("context", "q_start", "q_end", "s_start", "s_end", "score", "op_start",
                     "ops", "op_len", "evalue", "counts"):
            assert np.array_equal(getattr(got, name), getattr(plain, name)), name
    wrong = tails.searches.copy()
    wrong[:, TRACE_SCORE] += 7
    got = traceback_final(hsps, batch, codes, subject, stats, options, ahead=wrong,
                          ahead_runs=tails.runs)
    assert not np.array_equal(got.score, plain.score)


def test_dp_alignments_split_into_each_subjects_own_runs():
    """dp_tails_ahead: a launch's alignments for many subjects, each subject's runs gathered
    in its rows' order, counted from its first; alignments not made take no runs."""
    from gblastn.layouts import TRACE_FIELDS, TRACE_RUNS
    from gblastn.traceback import dp_tails_ahead

    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 5, 40)
    n = int(sizes.sum())
    counts = rng.integers(1, 9, n)
    made = rng.random(n) < 0.8
    scripts = [rng.integers(0, 1 << 20, c).astype(np.uint32) for c in counts]
    searches = np.zeros((n, TRACE_FIELDS + 1), dtype=np.int64)
    searches[:, TRACE_FIELDS] = made
    searches[~made, TRACE_RUNS:TRACE_RUNS + 2] = -1  # whatever the device left there
    pool, at = [], 0
    for i in rng.permutation(n):
        searches[i, TRACE_RUNS:TRACE_RUNS + 2] = (at, counts[i]) if made[i] else (-1, -1)
        pool.append(scripts[i])
        at += counts[i]
    rows = rng.integers(0, 100, (n, 8))
    ends = np.cumsum(sizes).tolist()
    split = dp_tails_ahead(rows, searches, np.concatenate(pool), ends)
    for tails, first, last in zip(split, [0] + ends[:-1], ends):
        assert np.array_equal(tails.rows, rows[first:last])
        at = 0
        for k, i in enumerate(range(first, last)):
            if not made[i]:
                continue
            assert tails.searches[k, TRACE_RUNS] == at
            assert np.array_equal(tails.runs[at:at + counts[i], 0], scripts[i])
            at += counts[i]
        assert tails.runs.shape == (at, 1)


@pytest.mark.parametrize("extra", [0, 100_000])
def test_dp_reach_holds_every_letter_a_traceback_reads(extra):
    """dp_reach: the whole of a short subject; in a long one, AdjustSubjectRange's window
    around the HSP's diagonal, holding every letter its traceback read."""
    from gblastn.dynprog import MAX_SUBJECT_OFFSET
    from gblastn.layouts import TRACE_READ
    from gblastn.traceback import dp_reach

    hsps, batch, _, subject, stats, options = traced_case(6, "dc-megablast")
    if extra:
        pad = encode_blastna("A" * extra)
        subject = np.concatenate([pad, subject])
        hsps.s_start += extra
        hsps.s_end += extra
        hsps.s_gapped_start += extra
    rows, ahead, _ = dp_tails_on_cpu(hsps, batch, subject, stats, options,
                                     np.random.default_rng(1))
    reach = dp_reach(rows, np.full(rows.shape[0], subject.size), batch.context_length)
    if subject.size < MAX_SUBJECT_OFFSET:
        assert (reach == [0, subject.size]).all()
    else:
        assert (reach[:, 1] - reach[:, 0] < subject.size).all()
    assert (reach[:, 0] <= ahead[:, TRACE_READ]).all()
    assert (ahead[:, TRACE_READ + 1] <= reach[:, 1]).all()


def test_a_dp_alignment_left_to_the_cpu_weighs_more_than_one_made_ahead():
    """trace_tasks: of two subjects with HSPs of the same letters, the one whose DP alignments
    the GPU made comes after the one left to the CPU, its work UNMADE_DP_WEIGHT times less
    (apart from the fixed share); without DP tails the letters alone count."""
    from gblastn.engine import TASK_FIXED_WORK, UNMADE_DP_WEIGHT, PrelimHits, trace_tasks
    from gblastn.hsp import hsp_rows, hsps_from_rows
    from gblastn.layouts import TRACE_FIELDS
    from gblastn.traceback import TailsAhead

    rows = np.zeros((2, 8), dtype=np.int64)
    rows[:, 2] = [300, 200]  # query ends: 500 letters in all
    rows[:, 5] = [90, 80]
    prelim = PrelimHits()
    for ordinal in (1, 2):
        hsps = hsps_from_rows(rows.copy())
        hsps.evalue = np.array([1e-30, 1e-20])
        prelim.add(0, ordinal, hsps)
    searches = np.zeros((2, TRACE_FIELDS + 1), dtype=np.int64)
    searches[:, TRACE_FIELDS] = 1
    prelim.tails[0, 2] = TailsAhead(hsp_rows(prelim.by_query[0][2]), searches, None)
    tasks = trace_tasks(prelim, make_options("dc-megablast"), [1000])
    assert [task.ordinal for task in tasks] == [1, 2]
    assert tasks[0].work - TASK_FIXED_WORK == UNMADE_DP_WEIGHT * (tasks[1].work - TASK_FIXED_WORK)
    assert tasks[1].tails is prelim.tails[0, 2] and tasks[0].tails is None
    greedy = trace_tasks(prelim, make_options("megablast"), [1000])
    assert greedy[0].work == greedy[1].work == 500 + TASK_FIXED_WORK
