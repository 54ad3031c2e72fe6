"""cuda/dynprog.cu's score-only DP extensions, compiled for the host (no GPU needed), equal
dynprog.py's field by field; an extension whose band outgrows the ring or whose cells exceed
the budget is left undone; and the gapped stage's in-order pass, given them, keeps exactly
the rows it keeps alone. tests/test_gpu_backend.py runs the same kernel on a GPU."""

import ctypes
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import gblastn
from gblastn.alphabet import encode_blastna, pack_2bit, score_matrix
from gblastn.dynprog import prelim_dp_extend
from gblastn.gapped import GAPPED_FIELDS, extend_hits, hit_contexts
from gblastn.layouts import GAPPED_AHEAD_FIELDS, GAPPED_MADE
from gblastn.options import make_options
from gblastn.query import Query, build_batch
from gblastn.scan.gpu import dp_costs, dp_defines, dp_hit_arrays, nvcc_options

KERNEL = Path(gblastn.__file__).parent / "cuda" / "dynprog.cu"
# (reward, penalty, gap open, gap extend, raw X-drop): blastn's scorings and their gap costs
SCORINGS = [(2, -3, 5, 2, 30), (1, -2, 5, 2, 30), (1, -1, 5, 2, 15), (4, -5, 12, 8, 60),
            (1, -3, 2, 1, 20)]


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    """Build dp_hits_host for a ring of `columns`; returns a function of the columns."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    built = {}

    def build(columns: int):
        if columns not in built:
            path = tmp_path_factory.mktemp("dynprog") / f"dp{columns}.so"
            subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-x", "c++",
                            *nvcc_options(dp_defines(columns)), str(KERNEL), "-o", str(path)],
                           check=True)
            built[columns] = ctypes.CDLL(str(path)).dp_hits_host
        return built[columns]
    return build


def dp_case(seed: int, scoring: tuple, ambiguous: bool = False):
    """A 4 kb query, copies of two overlapping parts of it with substitutions and indels
    inside a subject, and initial hits along and off their diagonals (some at the sequences'
    ends), in score order."""
    from golden import mutate, random_dna

    rng = np.random.default_rng(seed)
    query = random_dna(rng, 4000)
    subject = np.concatenate([random_dna(rng, 300), mutate(rng, query[:2500], 0.06, 0.01),
                              random_dna(rng, 300), mutate(rng, query[1500:], 0.1, 0.01),
                              random_dna(rng, 300)])
    letters = query.copy()
    if ambiguous:
        letters[rng.integers(0, query.size, 40)] = ord("N")
    reward, penalty, gap_open, gap_extend, xdrop = scoring
    options = make_options("blastn", dust="no", reward=reward, penalty=penalty,
                           gapopen=gap_open, gapextend=gap_extend)
    batch = build_batch([Query("q", "q", encode_blastna(letters.tobytes().decode()),
                               np.zeros(query.size, bool))], options)
    n = 200
    length = rng.integers(11, 60, n)
    q = rng.integers(0, query.size - length)
    copy = 300 + np.where(q < 2000, 0, 2500 + 300 - 1500)  # each hit's copy's diagonal
    s = np.clip(q + copy + rng.integers(-40, 40, n), 0, subject.size - length)
    q[:3], s[:3] = 0, 0  # at the start of both
    q[3], s[3] = query.size - length[3], subject.size - length[3]  # at their ends
    seed_at = rng.integers(0, length - 10)
    score = rng.integers(15, 120, n)
    order = np.argsort(-score, kind="stable")
    base = int(batch.context_offset[0])
    subject_codes = encode_blastna(subject.tobytes().decode())
    hits = SimpleNamespace(q_start=base + q[order], s_start=s[order], length=length[order],
                           score=score[order], seed_q=(base + q + seed_at)[order],
                           seed_s=(s + seed_at)[order], chunk=np.zeros(n, dtype=np.int64))
    stats = SimpleNamespace(gapped_cutoff=np.array([25, 25]), gap_xdrop=xdrop)
    return hits, batch, pack_2bit(subject_codes), subject_codes.size, stats, options


def on_host(kernel, hits, batch, packed, subject_length, stats, options,
            budget: int = 1 << 40) -> np.ndarray:
    """The kernel's extensions, as GpuBackend.dp_extensions returns them."""
    contexts = hit_contexts(hits.q_start, batch)
    arrays = dp_hit_arrays(hits, contexts, batch, np.array([0]), np.array([subject_length]))
    matrix, *costs = dp_costs(score_matrix(options.reward, options.penalty), options.gapopen,
                              options.gapextend, int(stats.gap_xdrop), budget)
    n = arrays[0].size
    letters = np.ascontiguousarray(batch.sequence, dtype=np.uint8)
    found = np.full((n, GAPPED_AHEAD_FIELDS), -1, dtype=np.int64)
    cells = np.full(n, -1, dtype=np.int64)
    order = np.argsort(-hits.score, kind="stable").astype(np.int32)  # as the device orders them
    pointer = ctypes.c_void_p
    kernel(ctypes.c_int(n), pointer(order.ctypes.data),
           *(pointer(a.ctypes.data) for a in arrays),
           pointer(letters.ctypes.data), pointer(packed.ctypes.data),
           pointer(matrix.ctypes.data), *(ctypes.c_int(int(c)) for c in costs[:3]),
           ctypes.c_longlong(int(costs[3])), pointer(found.ctypes.data),
           pointer(cells.ctypes.data))
    assert (cells > 0).all() and (cells[found[:, GAPPED_MADE] == 1] <= budget).all()
    return found


def on_cpu(hits, batch, packed, subject_length, stats, options) -> np.ndarray:
    """dynprog.prelim_dp_extend of every hit, all marked made."""
    contexts = hit_contexts(hits.q_start, batch)
    matrix = score_matrix(options.reward, options.penalty).astype(np.int64)
    out = np.ones((len(hits.q_start), GAPPED_FIELDS + 1), dtype=np.int64)
    for i, ctx in enumerate(contexts):
        base = int(batch.context_offset[ctx])
        query = batch.sequence[base:base + int(batch.context_length[ctx])]
        out[i, :GAPPED_FIELDS] = prelim_dp_extend(
            query, packed, subject_length, int(hits.seed_q[i]) - base, int(hits.seed_s[i]),
            int(hits.s_start[i]), int(hits.length[i]), int(hits.score[i]), matrix,
            options.gapopen, options.gapextend, int(stats.gap_xdrop))
    return out


@pytest.mark.parametrize("scoring", SCORINGS)
@pytest.mark.parametrize("seed, ambiguous", [(1, False), (2, True)])
def test_kernel_extensions_are_dynprogs(host_kernel, scoring, seed, ambiguous):
    case = dp_case(seed, scoring, ambiguous)
    want = on_cpu(*case)
    assert np.array_equal(on_host(host_kernel(128), *case), want)


@pytest.mark.parametrize("scoring", SCORINGS[:2])
def test_a_band_too_wide_or_a_budget_spent_is_left_to_the_cpu(host_kernel, scoring):
    case = dp_case(3, scoring)
    want = on_cpu(*case)
    for kernel, budget in ((host_kernel(16), 1 << 40), (host_kernel(128), 20_000)):
        got = on_host(kernel, *case, budget=budget)
        made = got[:, GAPPED_MADE] == 1
        assert 0 < made.sum() < made.size
        assert np.array_equal(got[made], want[made])


@pytest.mark.parametrize("scoring", SCORINGS[:3])
def test_extensions_made_ahead_keep_the_in_order_rows(host_kernel, scoring):
    """The in-order pass takes the extensions marked made and extends the others itself:
    the same rows and origins as without any made ahead."""
    hits, batch, packed, subject_length, stats, options = dp_case(4, scoring)
    alone = extend_hits(hits.q_start, hits.s_start, hits.length, hits.score, batch, packed,
                        subject_length, stats, options, hits.seed_q, hits.seed_s)
    assert 1 < len(alone[0]) < len(hits.q_start)  # some kept, some contained
    ahead = on_host(host_kernel(128), hits, batch, packed, subject_length, stats, options,
                    budget=20_000)
    given = extend_hits(hits.q_start, hits.s_start, hits.length, hits.score, batch, packed,
                        subject_length, stats, options, hits.seed_q, hits.seed_s,
                        extensions=ahead)
    assert np.array_equal(given[0], alone[0])
    assert np.array_equal(given[1], alone[1])
