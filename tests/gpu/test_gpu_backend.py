"""The GPU backend (gblastn.scan.gpu) against the CPU: exactly the CPU backend's Seeds (all
fields, same order), the greedy kernels' extensions and traceback searches equal to the
CPU's, and a search's output byte-identical on either device; also the kernels' cache, the
resident volumes and their page-locked upload buffers, calls from other threads, and a
backend retired while the search ends. Skipped without pycuda and a GPU."""

import os
import subprocess
import sys

import numpy as np
import pytest

from gblastn.alphabet import pack_2bit
from gblastn.engine import subject_chunks
from gblastn.errors import GpuUnavailableError
from gblastn.layouts import TABLE_MEGABLAST as MEGABLAST, TABLE_SMALL as SMALL, \
    TABLE_STANDARD as STANDARD
from gblastn.lookup import build_lookup, dense_hashtable
from gblastn.options import make_options
from gblastn.pools import on_threads
from gblastn.query import Query, build_batch
from gblastn.scan import cpu
from gblastn.scan.backend import SubjectBuffer

pytestmark = pytest.mark.gpu

N_CODE = 14


@pytest.fixture(scope="module")
def gpu():
    try:
        from gblastn.scan.gpu import backend_for
        return backend_for(0)
    except GpuUnavailableError as exc:
        pytest.skip(str(exc))


# ----------------------------------------------------------------------------------------------
# inputs


def random_query(rng, n, with_n=True, lower=False):
    codes = rng.integers(0, 4, n).astype(np.uint8)
    # a low-complexity stretch (long chains in the table) and a few ambiguous letters
    if n > 400:
        a = int(rng.integers(0, n - 120))
        codes[a:a + 120] = np.tile(rng.integers(0, 4, 3).astype(np.uint8), 40)
    if with_n and n > 50:
        codes[rng.integers(0, n, max(1, n // 500))] = N_CODE
    lowercase = np.zeros(n, bool)
    if lower and n > 200:
        for _ in range(max(1, n // 1000)):
            a = int(rng.integers(0, n - 40))
            lowercase[a:a + int(rng.integers(5, 40))] = True
    return codes, lowercase


def make_batch(rng, task, qlens, lower=False, **kw):
    options = make_options(task, **kw)
    queries = []
    for i, n in enumerate(qlens):
        codes, lowercase = random_query(rng, n, lower=lower)
        queries.append(Query(f"q{i}", "", codes, lowercase))
    return build_batch(queries, options), options


def plant(rng, batch, bases, starts, lengths, count):
    """Copy pieces of the query contexts (3 % mutated) into random subjects."""
    seq = np.where(batch.sequence < 4, batch.sequence, 0).astype(np.uint8)
    for _ in range(count):
        ctx = int(rng.integers(batch.num_contexts))
        lo, n = int(batch.context_offset[ctx]), int(batch.context_length[ctx])
        subject = int(rng.integers(lengths.size))
        room = min(n, int(lengths[subject]), 200)
        if room < 20:
            continue
        ln = int(rng.integers(20, room + 1))
        a = lo + int(rng.integers(0, n - ln + 1))
        b = int(starts[subject]) + int(rng.integers(0, int(lengths[subject]) - ln + 1))
        piece = seq[a:a + ln].copy()
        flips = rng.random(ln) < 0.03
        piece[flips] = (piece[flips] + 1) % 4
        bases[b:b + ln] = piece


def volume(rng, batch, lengths, plants):
    """A packed volume (every subject starting on a byte boundary) and its chunks."""
    lengths = np.asarray(lengths, dtype=np.int64)
    starts = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    bases = rng.integers(0, 4, int(lengths.sum())).astype(np.uint8)
    plant(rng, batch, bases, starts, lengths, plants)
    padded = (lengths + 3) // 4 * 4
    pstart = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(padded[:-1], out=pstart[1:])
    flat = np.zeros(int(padded.sum()), dtype=np.uint8)
    index = np.repeat(pstart - starts, lengths) + np.arange(int(lengths.sum()))
    flat[index] = bases
    packed = pack_2bit(flat)
    chunks = subject_chunks(lengths, pstart // 4)
    return packed, chunks


CASES = [
    # task, query lengths, overrides, lower case, expected (kind, width, word size)
    ("megablast", [700, 300], {}, False, (SMALL, 8, 28)),
    ("megablast", [5000], {}, False, (MEGABLAST, 11, 28)),
    ("megablast", [5000], {"lcase_masking": True}, True, (MEGABLAST, 11, 28)),
    ("megablast", [160000], {"dust": "no"}, False, (MEGABLAST, 12, 28)),
    ("blastn", [600], {}, False, (SMALL, 8, 11)),
    ("blastn", [9000], {}, False, (MEGABLAST, 10, 11)),
    ("blastn", [95000], {"dust": "no"}, False, (MEGABLAST, 11, 11)),
    ("blastn-short", [400], {}, False, (SMALL, 7, 7)),
    ("blastn-short", [100], {"dust": "no"}, False, (SMALL, 6, 7)),
    ("blastn", [600], {"word_size": 16}, False, (SMALL, 8, 16)),
    ("blastn", [5000], {"word_size": 16}, False, (MEGABLAST, 11, 16)),
    ("blastn", [17000], {"word_size": 8, "dust": "no"}, False, (STANDARD, 8, 8)),
    ("blastn", [17000], {"word_size": 9, "soft_masking": False, "lcase_masking": True}, True, (MEGABLAST, 9, 9)),
]
IDS = [f"{c[0]}-{c[4][0]}{c[4][1]}-W{c[4][2]}-{c[1][0]}" for c in CASES]


@pytest.fixture(scope="module", params=range(len(CASES)), ids=IDS)
def case(request):
    task, qlens, kw, lower, expected = CASES[request.param]
    rng = np.random.default_rng(100 + request.param)
    batch, options = make_batch(rng, task, qlens, lower=lower, **kw)
    table = build_lookup(batch, options)
    assert (table.kind, table.width, table.word_size) == expected
    return rng, batch, table


def on_device(packed):
    """A packed buffer as the GPU backend keeps it, under a record of its own."""
    return SubjectBuffer(packed, np.array([0, packed.size], dtype=np.int64))


def assert_same(gpu, table, packed, chunks, min_seeds=1):
    want = cpu.find_seeds(table, packed, chunks.byte_offset, chunks.length, num_threads=4,
                          spread=on_threads(4))
    got = gpu.find_seeds(table, on_device(packed), chunks.byte_offset, chunks.length)
    for name in ("chunk", "q_off", "s_off", "s_first", "hit_s"):
        a, b = getattr(want, name), getattr(got, name)
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.shape, b.shape)
        bad = np.flatnonzero(a != b)
        assert bad.size == 0, (name, bad[:5], a[bad[:5]], b[bad[:5]])
    assert len(want) >= min_seeds
    return len(want)


def test_mixed_subjects(gpu, case):
    rng, batch, table = case
    lengths = [3001, 17, 2500, 999, 1, 8, 40000, 64, 5, 777]
    packed, chunks = volume(rng, batch, lengths, plants=60)
    assert_same(gpu, table, packed, chunks)


def test_seeds_extended_ahead_are_the_cpu_extensions(gpu, case):
    """extended_seeds gives find_seeds' seeds and every seed's ungapped extension as
    ungapped.py makes it (cuda/ungapped.cu; the extensions of a volume in several launch
    groups come back in seed order)."""
    from test_ungapped_kernel import numba_rows

    from gblastn.ungapped import ungapped_rules

    rng, batch, table = case
    packed, chunks = volume(rng, batch, [3001, 17, 2500, 999, 1, 8, 40000, 64, 5, 777],
                            plants=60)
    nc = batch.num_contexts
    rules = ungapped_rules(rng.integers(10, 40, nc), rng.integers(10, 30, nc), 1, -2)
    want = cpu.find_seeds(table, packed, chunks.byte_offset, chunks.length)
    for groups in (None, 5000):
        if groups:
            gpu.max_group_probes = groups
        try:
            seeds, ahead = gpu.extended_seeds(table, on_device(packed), chunks.byte_offset,
                                              chunks.length, rules)
        finally:
            gpu.max_group_probes = 1 << 32
        assert seeds.equals(want) and len(want) > 0
        assert np.array_equal(ahead.rows, numba_rows(table, want, packed, chunks.byte_offset,
                                                     chunks.length, rules))


@pytest.mark.parametrize("window", [0, 40])
def test_initial_hits_on_the_device_are_the_cpu_pass(gpu, case, window):
    """initial_hits (the in-order pass on the device, cuda/diagonals.cu) finds exactly the
    hits of ungapped.extend_seeds, in its order, with the diagonal array or the hash, one-hit
    and two-hit (its buckets in lanes); over a volume in several launch groups, and with the
    hash through two calls (two volumes of a batch), its chains with room for one cell at
    first."""
    from test_ungapped_kernel import numba_rows

    from gblastn.ungapped import (DiagonalHash, UngappedAhead, device_hash_lanes,
                                  diagonal_pass, extend_seeds, ungapped_rules, uses_diag_hash)

    rng, batch, table = case
    packed, chunks = volume(rng, batch, [3001, 17, 2500, 999, 1, 8, 40000, 64, 5, 777],
                            plants=60)
    nc = batch.num_contexts
    rules = ungapped_rules(rng.integers(10, 40, nc), rng.integers(10, 30, nc), 1, -2)
    cutoff = (rules.reduced_cutoff * 5 // 4).astype(np.int32)
    seeds = cpu.find_seeds(table, packed, chunks.byte_offset, chunks.length)
    ahead = UngappedAhead(numba_rows(table, seeds, packed, chunks.byte_offset, chunks.length,
                                     rules))
    host_hash = DiagonalHash(1, window)
    device_hash = DiagonalHash(1, window, device_hash_lanes(window, table.word_size))
    narrow = device_hash.chains
    narrow.diag, narrow.level, narrow.saved = (a[:, :1].copy() for a in
                                               (narrow.diag, narrow.level, narrow.saved))
    walk = diagonal_pass(table, cutoff, window, device_hash)
    for groups in (None, 5000):
        want = extend_seeds(seeds, table, packed, chunks.byte_offset, chunks.length,
                            rules.xdrop, cutoff, rules.reduced_cutoff, 1, -2, window=window,
                            diag_hash=host_hash, ahead=ahead)
        if groups:
            gpu.max_group_probes = groups
        try:
            hits, count = gpu.initial_hits(table, on_device(packed), chunks.byte_offset,
                                           chunks.length, rules, walk)
        finally:
            gpu.max_group_probes = 1 << 32
        got = hits  # sorted on the device as the host sorts them
        assert count == len(seeds) and len(want) > 0
        for f in ("chunk", "q_start", "s_start", "length", "score", "seed_q", "seed_s"):
            assert np.array_equal(getattr(want, f), getattr(got, f)), f
    if uses_diag_hash(table):
        assert narrow.offset == host_hash.offset


@pytest.mark.parametrize("entries", [1, 1023, 1024, 1025, 70000, 3_000_001])
def test_counts_become_starts_on_the_device(gpu, entries):
    """The device's scan of counts (diagonals.cu) gives numpy's exclusive sums and the total."""
    from gblastn.scan.gpu import diagonals_defines

    counts = np.random.default_rng(entries).integers(0, 1000, entries).astype(np.int64)
    with gpu:
        kernels = gpu.module(diagonals_defines(), "diagonals.cu")
        device = gpu.upload(np.append(counts, 0))
        try:
            gpu._counts_to_starts(kernels, device, entries)
            got = np.empty(entries + 1, dtype=np.int64)
            gpu.drv.memcpy_dtoh(got, device)
        finally:
            device.free()
    want = np.concatenate([[0], np.cumsum(counts)])
    assert np.array_equal(got, want)


@pytest.mark.parametrize("n, low_bit, high_bit", [
    (1, 0, 8), (1023, 3, 20), (1025, 20, 44), (300_001, 11, 38), (2_000_000, 0, 64)])
def test_the_radix_sort_on_the_device_is_numpys_stable_sort(gpu, n, low_bit, high_bit):
    """diagonals.cu's radix sort orders (key, value) pairs by bits [low_bit, high_bit) of the
    keys as numpy's stable sort does: pairs whose bits tie keep their order (the seeds' sort
    relies on it), whatever the other bits."""
    from gblastn.scan.gpu import diagonals_defines

    rng = np.random.default_rng(n)
    keys = rng.integers(0, 2**63, n, dtype=np.uint64) | \
        (rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63))
    width = high_bit - low_bit
    tied = rng.integers(0, 1 << min(width, 12), n, dtype=np.uint64) << np.uint64(low_bit)
    mask = np.uint64(((1 << width) - 1) << low_bit) if width < 64 else np.uint64(2**64 - 1)
    keys = (keys & ~mask) | (tied & mask)  # few distinct values in the sorted bits: many ties
    values = rng.permutation(n).astype(np.uint32)
    with gpu:
        kernels = gpu.module(diagonals_defines(), "diagonals.cu")
        keys_dev, values_dev = gpu.upload(keys), gpu.upload(values)
        try:
            gpu.radix_sort(kernels, keys_dev, values_dev, n, low_bit, high_bit)
            sorted_keys = np.empty(n, dtype=np.uint64)
            sorted_values = np.empty(n, dtype=np.uint32)
            gpu.drv.memcpy_dtoh(sorted_keys, keys_dev)
            gpu.drv.memcpy_dtoh(sorted_values, values_dev)
        finally:
            keys_dev.free()
            values_dev.free()
    order = np.argsort(keys & mask, kind="stable")
    assert np.array_equal(sorted_keys, keys[order])
    assert np.array_equal(sorted_values, values[order])


@pytest.mark.parametrize("n", [1, 257, 70_001])
def test_hits_sorted_on_the_device_are_in_the_hosts_order(gpu, n):
    """The device's sort of the initial hits (diagonals.cu, one field at a time) gives
    ungapped.sort_initial_hits' order, hits equal in every key keeping their order."""
    from gblastn.layouts import HIT_FIELDS
    from gblastn.scan.gpu import diagonals_defines
    from gblastn.ungapped import initial_hits_of_rows, sort_initial_hits

    rng = np.random.default_rng(n)
    # few distinct values: many ties in each key, some hits equal in all of them
    rows = np.stack([rng.integers(0, 3 if f < 5 else 1 << 20, n) * (7 if f == 0 else 1)
                     + (1 << 20 if f in (1, 2) else 0) for f in range(HIT_FIELDS)])
    rows = np.ascontiguousarray(rows.astype(np.int32))
    with gpu:
        kernels = gpu.module(diagonals_defines(), "diagonals.cu")
        hits_dev = gpu.upload(rows)
        try:
            sorted_dev = gpu._sorted_hits(kernels, hits_dev, n)
            got = np.empty_like(rows)
            gpu.drv.memcpy_dtoh(got, sorted_dev)
        finally:
            hits_dev.free()
    want = sort_initial_hits(initial_hits_of_rows(rows))
    for f, name in enumerate(("chunk", "q_start", "s_start", "length", "score", "seed_q",
                              "seed_s")):
        assert np.array_equal(got[f], getattr(want, name)), name


def test_primary_context_reference_taken_outside_pycuda_is_dropped_cleanly(gpu, case):
    """The backend has the driver make the primary context (GIL released) before pycuda
    retains it, then drops its own reference: taking and dropping one more leaves pycuda's
    context alive and the scans right."""
    from gblastn.cuda_context import retain_primary_context

    retain_primary_context(0)()
    rng, batch, table = case
    packed, chunks = volume(rng, batch, [5000, 120, 33000], plants=40)
    assert_same(gpu, table, packed, chunks)


def test_kernels_compile_once_then_load_from_the_cache(case, tmp_path, monkeypatch):
    """A fresh cache: the first backend calls nvcc for each of the scan's two modules
    (seeds.cu; diagonals.cu's radix sort), a second one in the same cache reads the cubins and
    scans exactly as the CPU does; damaged cubins are compiled again."""
    from gblastn.scan import gpu as gpu_module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    compiled = []
    real = gpu_module._nvcc_compile
    monkeypatch.setattr(gpu_module, "_nvcc_compile",
                        lambda *args: compiled.append(args[2]) or real(*args))
    rng, batch, table = case
    packed, chunks = volume(rng, batch, [5000, 120, 33000], plants=40)
    for _ in range(2):
        try:
            backend = gpu_module.GpuBackend(0)
        except GpuUnavailableError as exc:
            pytest.skip(str(exc))
        assert_same(backend, table, packed, chunks)
        backend.release()
    assert len(compiled) == 2
    cached = sorted((tmp_path / "gblastn" / "cubin").glob("*.cubin"))
    assert len(cached) == 2
    for cubin in cached:
        cubin.write_bytes(b"not a cubin")  # a damaged cache: compiled again, then right
    backend = gpu_module.GpuBackend(0)
    assert_same(backend, table, packed, chunks)
    backend.release()
    assert len(compiled) == 4 and all(c.read_bytes() != b"not a cubin" for c in cached)


def test_many_short_subjects(gpu, case):
    rng, batch, table = case
    lengths = rng.integers(50, 501, 100_000)
    packed, chunks = volume(rng, batch, lengths, plants=3000)
    assert chunks.length.size == 100_000
    assert_same(gpu, table, packed, chunks)


def test_few_long_subjects(gpu, case):
    rng, batch, table = case
    lengths = [6_000_003, 300_001, 5_200_000]
    packed, chunks = volume(rng, batch, lengths, plants=2000)
    assert chunks.length.size > len(lengths)  # cut in 5 Mb chunks
    assert_same(gpu, table, packed, chunks)


def test_full_buffers_grow_and_lose_nothing(case):
    from gblastn.scan.gpu import GpuBackend
    try:
        tiny = GpuBackend(0, hit_capacity=16, seed_capacity=16, max_group_probes=50_000)
    except GpuUnavailableError as exc:
        pytest.skip(str(exc))
    rng, batch, table = case
    lengths = rng.integers(50, 3000, 2000)
    packed, chunks = volume(rng, batch, lengths, plants=400)
    assert_same(tiny, table, packed, chunks, min_seeds=17)
    assert tiny.stats["hit_grows"] >= 1 and tiny.stats["seed_grows"] >= 1
    tiny.release()


def test_megablast_heads_spread_on_the_device_are_blasts_array(gpu, case):
    """A contiguous megablast table's 4^w chain heads, which the device spreads from the
    heads of the words present, are BLAST's array: each present word's head, 0 elsewhere."""
    rng, batch, table = case
    if table.kind != MEGABLAST:
        pytest.skip("a megablast table's heads")
    packed, chunks = volume(rng, batch, [3000], plants=5)
    gpu.find_seeds(table, on_device(packed), chunks.byte_offset, chunks.length)
    got = np.empty(table.present.size << 5, dtype=np.int32)
    with gpu:  # the backend's context, current on this thread for the copy
        gpu.drv.memcpy_dtoh(got, gpu.table_arrays["hashtable"])
    assert np.array_equal(got, dense_hashtable(table.heads, table.present))
    assert np.count_nonzero(got) == table.heads.size > 0


def test_volume_stays_resident(gpu, case):
    rng, batch, table = case
    packed, chunks = volume(rng, batch, [5000, 7000], plants=20)
    subjects = on_device(packed)
    gpu.find_seeds(table, subjects, chunks.byte_offset, chunks.length)
    held = gpu.volumes[subjects.key][0]
    gpu.find_seeds(table, subjects, chunks.byte_offset, chunks.length)
    assert gpu.volumes[subjects.key][0] is held


def test_preloaded_volume_is_the_volume_and_leaves_no_warning(gpu, case, monkeypatch):
    import warnings
    from gblastn.scan import gpu as gpu_module

    rng, batch, table = case
    monkeypatch.setattr(gpu_module, "UPLOAD_STEP", 1 << 16)  # many steps on every thread
    packed, chunks = volume(rng, batch, [400_000, 300_000, 250_000], plants=40)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        subjects = on_device(packed)
        assert gpu.preload(subjects)
        import gc
        gc.collect()
    assert not caught, [str(w.message) for w in caught]
    copied = np.empty(packed.size, dtype=np.uint8)
    with gpu:
        gpu.drv.memcpy_dtoh(copied, gpu.volumes[subjects.key][0])
    assert np.array_equal(copied, packed)
    assert_same(gpu, table, packed, chunks)


def test_upload_buffers_are_page_locked_by_the_driver(gpu):
    from gblastn.cuda_context import page_locked_buffer

    with gpu:
        made = page_locked_buffer(1 << 20)
        assert made is not None, "the driver gave no page-locked memory"
        buffer, free = made
        buffer[:] = np.arange(buffer.size) % 251
        on_device = gpu.drv.mem_alloc(buffer.size)
        stream = gpu.drv.Stream()
        gpu.drv.memcpy_htod_async(on_device, buffer, stream)
        stream.synchronize()
        back = np.empty_like(buffer)
        gpu.drv.memcpy_dtoh(back, on_device)
        on_device.free()
        assert np.array_equal(back, buffer)
        assert free() == 0  # CUDA_SUCCESS
        assert free() is None  # freed once


def test_runs_from_another_thread(gpu, case):
    from concurrent.futures import ThreadPoolExecutor
    rng, batch, table = case
    packed, chunks = volume(rng, batch, [20000, 3000], plants=30)
    with ThreadPoolExecutor(max_workers=1) as pool:
        got = pool.submit(gpu.find_seeds, table, on_device(packed), chunks.byte_offset,
                          chunks.length).result()
    assert got.equals(cpu.find_seeds(table, packed, chunks.byte_offset, chunks.length))


# ----------------------------------------------------------------------------------------------
# the whole search, -device gpu against -device cpu


@pytest.mark.parametrize("seed, ambiguous", [(1, False), (2, True), (3, True)])
def test_greedy_extensions_are_the_cpu_ones(gpu, seed, ambiguous):
    """Every hit's greedy extension made on the GPU equals the gapped stage's own; with
    rows too narrow for some bands, or a search too short for some alignments, those hits
    are marked undone and the rest still equal."""
    from test_gapped import extensions_on_cpu, many_hits_case

    from gblastn.gapped import GAPPED_FIELDS, hit_contexts

    case = many_hits_case(seed, ambiguous)
    q_start, s_start, length, _, batch, packed, chunk_length, stats, options = case
    want = extensions_on_cpu(*case)

    def on_gpu(**tuning):
        return gpu.greedy_extensions(on_device(packed), np.array([0]), np.array([chunk_length]),
                                     np.zeros(len(q_start)), q_start, s_start, length,
                                     hit_contexts(q_start, batch), batch, int(stats.gap_xdrop),
                                     options.reward, options.penalty, **tuning)

    assert np.array_equal(on_gpu(), want)
    for tuning in ({"row_cells": 8}, {"max_distance": 20}):
        cut = on_gpu(**tuning)
        made = cut[:, GAPPED_FIELDS] == 1
        assert not made.all()
        assert np.array_equal(cut[made], want[made])


@pytest.mark.parametrize("scoring", [(2, -3, 5, 2, 30), (1, -2, 5, 2, 30), (4, -5, 12, 8, 60)])
@pytest.mark.parametrize("seed, ambiguous", [(1, False), (2, True)])
def test_dp_extensions_are_the_cpu_ones(gpu, scoring, seed, ambiguous):
    """Every hit's DP extension made on the GPU equals dynprog.prelim_dp_extend's; with a
    small cell budget the long ones are marked undone and the rest still equal."""
    from test_dynprog_kernel import dp_case, on_cpu

    from gblastn.alphabet import score_matrix
    from gblastn.gapped import GAPPED_FIELDS, hit_contexts

    case = dp_case(seed, scoring, ambiguous)
    hits, batch, packed, subject_length, stats, options = case
    want = on_cpu(*case)

    def on_gpu(**tuning):
        return gpu.dp_extensions(on_device(packed), np.array([0]), np.array([subject_length]),
                                 hits, hit_contexts(hits.q_start, batch), batch,
                                 score_matrix(options.reward, options.penalty),
                                 options.gapopen, options.gapextend, int(stats.gap_xdrop),
                                 **tuning)

    assert np.array_equal(on_gpu(), want)
    cut = on_gpu(budget=20_000)
    made = cut[:, GAPPED_FIELDS] == 1
    assert 0 < made.sum() < made.size
    assert np.array_equal(cut[made], want[made])


@pytest.mark.parametrize("seed", [1, 2])
def test_greedy_tails_are_the_cpu_searches(gpu, seed):
    """The traceback's greedy searches made on the GPU, and their edit runs, equal the
    CPU's; a search that reads letters outside the window given as bases only, or goes on
    too long, is left to the CPU."""
    from test_traceback import tails_on_cpu, traced_case

    from gblastn.hsp import hsp_rows, score_order
    from gblastn.traceback import TAIL_FIELDS

    hsps, batch, _, subject, stats, options = traced_case(seed)
    want, want_runs = tails_on_cpu(hsps, batch, subject, stats, options)
    subjects = on_device(pack_2bit(subject))
    assert gpu.preload(subjects)
    rows = hsp_rows(hsps)[score_order(hsps)]
    n = rows.shape[0]

    def on_gpu(exact, **tuning):
        return gpu.greedy_tails(rows, np.full(n, gpu.resident_address(subjects), dtype=np.uint64),
                                np.full(n, subject.size), exact, batch,
                                int(stats.gap_xdrop_final), options.reward, options.penalty,
                                **tuning)

    whole = np.tile([0, subject.size], (n, 1))
    got, got_runs = on_gpu(whole)
    assert np.array_equal(got, want) and np.array_equal(got_runs, want_runs)
    assert (got[:, 10:12] >= 1).all()
    searched, _ = on_gpu(whole, edit_runs=False)  # the searches alone
    assert (searched[:, 10:12] == -1).all()
    assert np.array_equal(np.delete(searched, [10, 11], axis=1),
                          np.delete(want, [10, 11], axis=1))
    narrow = np.stack([rows[:, 3] - 20, rows[:, 4] + 20], axis=1)
    distances = want[:, 2:4].max(axis=1)
    for cut, cut_runs in (on_gpu(narrow), on_gpu(whole, max_distance=int(np.median(distances)))):
        made = cut[:, TAIL_FIELDS] == 1
        assert not made.all()
        assert np.array_equal(cut[made], want[made])
        assert np.array_equal(cut_runs[made], want_runs[made])


@pytest.mark.parametrize("seed, scoring", [(1, (2, -3, 5, 2, 110)), (2, (1, -2, 5, 2, 100)),
                                           (3, (4, -5, 12, 8, 220))])
def test_dp_tails_are_the_cpu_tracebacks(gpu, seed, scoring):
    """The traceback's DP alignments made on the GPU, and their edit runs, equal the CPU's;
    one that reads letters outside the window given as bases only is left to the CPU."""
    from test_dp_traceback_kernel import assert_made_equal, every_letter, on_cpu, trace_case

    from gblastn.alphabet import score_matrix
    from gblastn.layouts import TRACE_FIELDS

    rows, subject, batch = trace_case(seed, subject_extra=100_000 if seed == 3 else 0)
    want = on_cpu(rows, subject, batch, scoring)
    subjects = on_device(pack_2bit(subject))
    assert gpu.preload(subjects)
    n = rows.shape[0]
    reward, penalty, gap_open, gap_extend, xdrop = scoring

    def on_gpu(exact, **budget):
        return gpu.dp_tails(rows, np.full(n, gpu.resident_address(subjects), dtype=np.uint64),
                            np.full(n, subject.size), exact, batch,
                            score_matrix(reward, penalty), gap_open, gap_extend, xdrop, **budget)

    got, runs = on_gpu(every_letter(rows, subject))
    assert assert_made_equal(got, runs, want) == n
    for budget in (40_000, 60_000):  # the alignments of fewer cells only
        cut, cut_runs = on_gpu(every_letter(rows, subject), budget=budget)
        assert 0 < assert_made_equal(cut, cut_runs, want) < n
    narrow = np.stack([rows[:, 3] - 20, rows[:, 4] + 20], axis=1)
    cut, cut_runs = on_gpu(narrow)
    made = assert_made_equal(cut, cut_runs, want)
    assert made < n and not cut[:, TRACE_FIELDS].all()


def test_greedy_tails_called_from_many_threads_at_once(gpu):
    """Calls waiting for the device while another runs are made in one launch: each thread
    gets its own searches, as from a call alone, whatever the calls made together."""
    from concurrent.futures import ThreadPoolExecutor

    from test_traceback import traced_case

    from gblastn.hsp import hsp_rows, score_order

    hsps, batch, _, subject, stats, options = traced_case(1)
    subjects = on_device(pack_2bit(subject))
    assert gpu.preload(subjects)
    rows = hsp_rows(hsps)[score_order(hsps)]
    n = rows.shape[0]
    address = np.full(n, gpu.resident_address(subjects), dtype=np.uint64)
    whole = np.tile([0, subject.size], (n, 1))

    def tails(part):
        return gpu.greedy_tails(rows[part], address[part], np.full(part.size, subject.size),
                                whole[part], batch, int(stats.gap_xdrop_final),
                                options.reward, options.penalty)

    want, want_runs = tails(np.arange(n))
    parts = [np.arange(k, n, 7) for k in range(7)] * 4
    launches = []
    real = gpu._greedy_tails
    gpu._greedy_tails = lambda *args: launches.append(len(args[0])) or real(*args)
    try:
        with ThreadPoolExecutor(len(parts)) as pool:
            results = list(pool.map(tails, parts))
    finally:
        del gpu._greedy_tails
    for part, (got, got_runs) in zip(parts, results):
        assert np.array_equal(got, want[part]) and np.array_equal(got_runs, want_runs[part])
    assert sum(launches) == sum(part.size for part in parts)


def write_fasta(path, records):
    with open(path, "w") as f:
        for name, seq in records:
            f.write(f">{name}\n")
            for i in range(0, len(seq), 70):
                f.write(seq[i:i + 70] + "\n")


@pytest.mark.parametrize("limits", [[], ["-max_hsps", "1", "-max_target_seqs", "5",
                                     "-qcov_hsp_perc", "10"]], ids=["all", "limited"])
@pytest.mark.parametrize("task", ["megablast", "blastn", "blastn-short", "dc-megablast"])
def test_search_output_identical(gpu, tmp_path, task, limits):
    rng = np.random.default_rng(7)
    letters = np.array(list("ACGT"))
    queries = ["".join(letters[rng.integers(0, 4, n)]) for n in (600, 3000, 90)]
    subjects = []
    for i in range(400):
        s = letters[rng.integers(0, 4, int(rng.integers(100, 3000)))]
        q = queries[i % 3]
        a = int(rng.integers(0, len(q) - 40))
        piece = np.array(list(q[a:a + int(rng.integers(30, min(300, len(q) - a) + 1))]))
        at = int(rng.integers(0, max(1, s.size - piece.size)))
        s[at:at + piece.size] = piece[:s.size - at]
        subjects.append("".join(s))
    write_fasta(tmp_path / "db.fa", [(f"s{i}", s) for i, s in enumerate(subjects)])
    write_fasta(tmp_path / "q.fa", [(f"q{i}", q) for i, q in enumerate(queries)])
    run = [sys.executable, "-m", "gblastn"]
    env = dict(os.environ)
    made = subprocess.run(run + ["makedb", "-in", str(tmp_path / "db.fa"), "-out",
                                 str(tmp_path / "db"), "-quiet"], capture_output=True, env=env)
    assert made.returncode == 0, made.stderr.decode()[-2000:]
    outputs = {}
    # the command line gives the GPU back before its tracebacks (GpuBackend.retire), in
    # both drivers: the output stays whole and nothing is reported on the way out
    for device, mode in (("cpu", "pipeline"), ("gpu", "pipeline"), ("gpu", "serial")):
        res = subprocess.run(run + ["search", "-db", str(tmp_path / "db"), "-query",
                                    str(tmp_path / "q.fa"), "-task", task, "-device", device,
                                    "-mode", mode, *limits], capture_output=True, env=env)
        assert res.returncode == 0, (device, mode, res.stderr.decode()[-2000:])
        assert res.stderr == b""
        outputs[device, mode] = res.stdout
    assert outputs["cpu", "pipeline"], "no hits: the comparison would prove nothing"
    assert outputs["gpu", "pipeline"] == outputs["cpu", "pipeline"]
    assert outputs["gpu", "serial"] == outputs["cpu", "pipeline"]


def test_subjects_without_letters_on_the_gpu_as_on_the_cpu(gpu, tmp_path):
    """-subject records that hold no letter: a database of none, searched on the GPU as on
    the CPU (no hits, each warned about)."""
    write_fasta(tmp_path / "q.fa", [("q0", "ACGTTGCA" * 40)])
    (tmp_path / "s.fa").write_text(">s0\n>s1\n\n")
    outputs = {}
    for device in ("cpu", "gpu"):
        res = subprocess.run([sys.executable, "-m", "gblastn", "search", "-subject",
                              str(tmp_path / "s.fa"), "-query", str(tmp_path / "q.fa"),
                              "-outfmt", "7", "-device", device], capture_output=True)
        assert res.returncode == 0, res.stderr.decode()[-2000:]
        assert res.stderr.decode().count("Subject sequence contains no data") == 2
        outputs[device] = res.stdout
    assert b"# 0 hits found" in outputs["cpu"] and outputs["gpu"] == outputs["cpu"]


# a child process with a backend that has searched once (`old`, `args`)
BACKEND_SCRIPT = """
import os
import time
import numpy as np
from gblastn.errors import GpuUnavailableError
from gblastn.scan.gpu import backend_for
from gblastn.lookup import build_lookup
from test_gpu_backend import make_batch, on_device, volume
rng = np.random.default_rng(3)
batch, options = make_batch(rng, "megablast", [3000])
table = build_lookup(batch, options)
packed, chunks = volume(rng, batch, [5000, 800, 12000], plants=30)
args = (table, on_device(packed), chunks.byte_offset, chunks.length)
old = backend_for(0)


def retire_old(for_good=False, done=lambda: True):
    # retire `old`, wait for its teardown (and `done`), and check that it refuses work
    old.retire(for_good=for_good)
    for _ in range(200):
        if old.retired and done():
            break
        time.sleep(0.05)
    try:
        old.find_seeds(*args)
        print("the retired backend still ran")
    except GpuUnavailableError:
        pass
"""

RETIRE_SCRIPT = BACKEND_SCRIPT + """
before = old.find_seeds(*args)
retire_old()
new = backend_for(0)
after = new.find_seeds(*args)
fields = ("chunk", "q_off", "s_off", "s_first", "hit_s")
same = all(np.array_equal(getattr(before, f), getattr(after, f)) for f in fields)
print("ok" if new is not old and len(before) > 0 and same else "different", flush=True)
os._exit(0)  # as the command line leaves: nothing of the retired backend is freed
"""


def test_retired_backend_refuses_work_and_a_new_one_takes_over(gpu):
    """retire tears the device's context down in a thread: the old backend then refuses
    (one clear error), and backend_for makes a fresh one that finds the same seeds. In a
    child process: the reset ends every allocation of the process on that device."""
    res = subprocess.run([sys.executable, "-c", RETIRE_SCRIPT], capture_output=True,
                         cwd=os.path.dirname(__file__), text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "ok", res.stdout + res.stderr[-2000:]
    assert res.stderr == ""


RETIRE_FOR_GOOD_SCRIPT = BACKEND_SCRIPT + """


def driver_files():
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:  # the listing's own file is closed by now
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/dev/nvidia"):
                found.append(fd)
        except OSError:
            pass
    return found


old.find_seeds(*args)
assert driver_files(), "no driver files to close"
retire_old(for_good=True, done=lambda: not driver_files())
time.sleep(0.5)  # the process goes on after the driver's files are closed
print("closed" if not driver_files() else "still open", flush=True)
os._exit(0)
"""


def test_retired_for_good_closes_the_driver_files(gpu):
    """The command line's retire (for good) also closes the driver's files, while the
    process goes on with its tracebacks and output; nothing is reported on the way out."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc/self/fd here")
    res = subprocess.run([sys.executable, "-c", RETIRE_FOR_GOOD_SCRIPT], capture_output=True,
                         cwd=os.path.dirname(__file__), text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "closed", res.stdout + res.stderr[-2000:]
    assert res.stderr == ""
