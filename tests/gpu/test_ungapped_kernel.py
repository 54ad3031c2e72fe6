"""cuda/ungapped.cu's extensions of seeds, compiled for the host (no GPU needed), equal
ungapped.py's extend_approx / extend_exact seed by seed (ambiguous query letters, sentinels,
subjects' ends, every task's word size and scoring); and the ungapped stage's in-order pass,
given them ahead, finds exactly the initial hits it finds alone, with the diagonal array and
with the hash. tests/gpu/test_gpu_backend.py runs the same kernel on a GPU."""

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import gblastn
from gblastn.layouts import SEED_FIELDS, UNGAPPED_FIELDS
from gblastn.lookup import build_lookup
from gblastn.options import make_options
from gblastn.pools import on_threads
from gblastn.query import Query, build_batch
from gblastn.scan.cpu import context_of, find_seeds
from gblastn.scan.gpu import nvcc_options
from gblastn.ungapped import (UngappedAhead, extend_approx, extend_exact, extend_seeds,
                              ungapped_rules, uses_diag_hash)

from test_scan import pack_chunks

KERNEL = Path(gblastn.__file__).parent / "cuda" / "ungapped.cu"
N_CODE = 14  # blastna N
# (task, query lengths, reward, penalty, X-drop, cutoff): every task's word size, the
# scorings blastn takes; queries over 8,000 letters in all use the diagonal hash
CASES = [
    ("blastn-short", [300, 200], 1, -3, 11, 13),
    ("blastn", [700, 90], 2, -3, 22, 25),
    ("blastn", [1200], 1, -1, 15, 20),
    ("blastn", [900], 4, -5, 40, 50),
    ("megablast", [900, 400], 1, -2, 11, 13),
    ("blastn", [5000, 4000], 1, -2, 20, 19),
]


def host_library(folder, kernel: Path, defines: dict) -> ctypes.CDLL:
    """A kernel file's plain C++ twin compiled for the host, as a shared library in
    `folder` (skips the test without a C++ compiler)."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    path = folder / f"{kernel.stem}.so"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-x", "c++", *nvcc_options(defines),
                    str(kernel), "-o", str(path)], check=True)
    return ctypes.CDLL(str(path))


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    return host_library(tmp_path_factory.mktemp("ungapped"), KERNEL, {}).ungapped_seeds_host


def search_case(seed: int, task: str, query_lengths: list, reward: int, penalty: int):
    """Random queries with a few N runs; subjects carrying mutated pieces of them (both
    strands) so that extensions stop at varied places, some at the subjects' ends."""
    rng = np.random.default_rng(seed)
    gaps = {"gapopen": 12, "gapextend": 8} if (reward, penalty) == (4, -5) else {}
    options = make_options(task, dust="no", reward=reward, penalty=penalty, **gaps)
    queries = []
    for n in query_lengths:
        q = rng.integers(0, 4, n).astype(np.uint8)
        for at in rng.integers(0, n - 5, 3):
            q[at:at + int(rng.integers(1, 5))] = N_CODE
        queries.append(q)
    batch = build_batch([Query(f"q{i}", "", q, np.zeros(q.size, bool))
                         for i, q in enumerate(queries)], options)
    subjects = []
    for n in [int(x) for x in rng.integers(30, 3000, 8)]:
        s = rng.integers(0, 4, n).astype(np.uint8)
        for _ in range(6):
            src = batch.sequence[batch.context_offset[rng.integers(batch.num_contexts)]:]
            src = src[:int(batch.context_length.min())]
            ln = int(rng.integers(20, min(150, src.size, n) + 1))
            a, b = int(rng.integers(0, src.size - ln + 1)), int(rng.integers(0, n - ln + 1))
            piece = np.where(src[a:a + ln] > 3, 0, src[a:a + ln]).astype(np.uint8)
            flips = rng.random(ln) < 0.04
            piece[flips] = (piece[flips] + 1) % 4
            s[b:b + ln] = piece
        subjects.append(s)
    table = build_lookup(batch, options)
    packed, offsets, lengths = pack_chunks(subjects)
    return batch, options, table, packed, offsets, lengths


def kernel_rows(kernel, table, seeds, packed, offsets, lengths, rules) -> np.ndarray:
    """The kernel's UNGAPPED_FIELDS rows for the seeds, as GpuBackend.extended_seeds gives them."""
    n = len(seeds)
    rows = np.ascontiguousarray(np.stack([seeds.chunk, seeds.q_off, seeds.s_off, seeds.s_first,
                                          seeds.hit_s]), dtype=np.int32)
    assert rows.shape[0] == SEED_FIELDS
    out = np.zeros((UNGAPPED_FIELDS, n), dtype=np.int32)
    arrays = [rows, np.ascontiguousarray(offsets, np.int64), np.ascontiguousarray(lengths, np.int32),
              packed, np.ascontiguousarray(table.sequence, np.uint8),
              np.ascontiguousarray(table.context_offset, np.int32)]
    pointer = ctypes.c_void_p
    p = [pointer(a.ctypes.data) for a in arrays]
    kernel(p[0], ctypes.c_longlong(n), ctypes.c_int(0), p[1], p[2], p[3],
           ctypes.c_longlong(packed.size), p[4], ctypes.c_longlong(table.sequence.size), p[5],
           ctypes.c_int(table.context_offset.size), pointer(rules.xdrop.ctypes.data),
           pointer(rules.reduced_cutoff.ctypes.data), ctypes.c_int(table.word_size),
           pointer(rules.matrix.ctypes.data), pointer(rules.score_table.ctypes.data),
           pointer(out.ctypes.data))
    return out


def numba_rows(table, seeds, packed, offsets, lengths, rules) -> np.ndarray:
    matrix = rules.matrix.astype(np.int64)
    score_table = rules.score_table.astype(np.int64)
    out = np.zeros((UNGAPPED_FIELDS, len(seeds)), dtype=np.int32)
    for i in range(len(seeds)):
        c, q, s = int(seeds.chunk[i]), int(seeds.q_off[i]), int(seeds.s_off[i])
        ctx = context_of(table.context_offset, q)
        x = int(rules.xdrop[ctx])
        if table.word_size < 11:
            found = extend_exact(table.sequence, matrix, packed, int(offsets[c]),
                                 int(lengths[c]), q, s, x)
        else:
            found = extend_approx(table.sequence, matrix, score_table, packed, int(offsets[c]),
                                  int(lengths[c]), q, s, s + table.word_size, x,
                                  int(rules.reduced_cutoff[ctx]))
        out[:, i] = found
    return out


def rules_of(batch, reward, penalty, xdrop, cutoff):
    nc = batch.num_contexts
    cut = np.full(nc, cutoff, np.int32)
    return cut, ungapped_rules(np.full(nc, xdrop), (0.8 * cut).astype(np.int32), reward, penalty)


@pytest.mark.parametrize("task, qlens, reward, penalty, xdrop, cutoff", CASES)
def test_kernel_extensions_are_the_cpu_ones(host_kernel, task, qlens, reward, penalty, xdrop,
                                            cutoff):
    batch, options, table, packed, offsets, lengths = search_case(sum(qlens), task, qlens,
                                                                  reward, penalty)
    seeds = find_seeds(table, packed, offsets, lengths)
    assert len(seeds) > 50
    _, rules = rules_of(batch, reward, penalty, xdrop, cutoff)
    got = kernel_rows(host_kernel, table, seeds, packed, offsets, lengths, rules)
    assert np.array_equal(got, numba_rows(table, seeds, packed, offsets, lengths, rules))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("task, qlens, reward, penalty, xdrop, cutoff", CASES[1::4])
def test_extensions_ahead_give_the_in_order_hits(host_kernel, threads, task, qlens, reward,
                                                 penalty, xdrop, cutoff):
    batch, options, table, packed, offsets, lengths = search_case(7 + sum(qlens), task, qlens,
                                                                  reward, penalty)
    seeds = find_seeds(table, packed, offsets, lengths)
    cut, rules = rules_of(batch, reward, penalty, xdrop, cutoff)
    ahead = UngappedAhead(kernel_rows(host_kernel, table, seeds, packed, offsets, lengths, rules))
    args = (seeds, table, packed, offsets, lengths, rules.xdrop, cut, rules.reduced_cutoff,
            reward, penalty, threads)
    alone = extend_seeds(*args, spread=on_threads(threads))
    looked_up = extend_seeds(*args, spread=on_threads(threads), ahead=ahead)
    assert len(alone) > 0
    assert uses_diag_hash(table) == (sum(qlens) * 2 > 8000)
    for f in ("chunk", "q_start", "s_start", "length", "score", "seed_q", "seed_s"):
        assert np.array_equal(getattr(alone, f), getattr(looked_up, f))
