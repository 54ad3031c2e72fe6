"""cuda/diagonals.cu's in-order pass, compiled for the host (no GPU needed), finds exactly
the initial hits of ungapped.py's pass: the diagonal array and the hash, one-hit and two-hit
windows, seeds cut into launches that carry the hash's chains from one to the next, chains
that outgrow their room, a reset of the hash between chunks, and buckets crowded with seeds
whose cells go stale together (which cell a diagonal reuses decides hits there).
tests/gpu/test_gpu_backend.py runs the same kernels on a GPU."""

import ctypes
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import gblastn
from gblastn import ungapped
from gblastn.layouts import HIT_FIELDS, SEED_FIELDS
from gblastn.lookup import build_lookup
from gblastn.options import make_options
from gblastn.query import Query, build_batch
from gblastn.scan import Seeds
from gblastn.scan.cpu import find_seeds
from gblastn.scan.gpu import diagonals_defines
from gblastn.ungapped import (CHAIN_CELLS, HASH_OFFSET_LIMIT, DiagonalHash, HashChains,
                              InitialHits, UngappedAhead, device_hash_lanes, diagonal_pass,
                              extend_seeds,
                              initial_hits_of_rows, joined_initial_hits, sort_initial_hits,
                              uses_diag_hash)

from test_scan import pack_chunks
from test_ungapped_kernel import (CASES, host_kernel, host_library, kernel_rows,  # noqa: F401
                                  rules_of, search_case)

KERNEL = Path(gblastn.__file__).parent / "cuda" / "diagonals.cu"
LIMIT = 300  # HASH_OFFSET_LIMIT in test_chunk_offsets_follow_the_hosts_chunk_loop
FIELDS = ("chunk", "q_start", "s_start", "length", "score", "seed_q", "seed_s")


@pytest.fixture(scope="module")
def host_pass(tmp_path_factory):
    function = host_library(tmp_path_factory.mktemp("diagonals"), KERNEL,
                            diagonals_defines()).diagonal_pass_host
    function.restype = ctypes.c_longlong
    return function


def run_launch(host_pass, seeds, ahead, first, end, walk, chunk_length) -> InitialHits:
    """The pass over the seeds of chunks [first, end), as GpuBackend runs a launch group:
    the hash's chains carried in `walk`, grown and run again when one fills up."""
    lo, hi = np.searchsorted(seeds.chunk, [first, end])
    n = int(hi - lo)
    rows = np.ascontiguousarray(np.stack([seeds.chunk, seeds.q_off, seeds.s_off, seeds.s_first,
                                          seeds.hit_s])[:, lo:hi], dtype=np.int32)
    assert rows.shape[0] == SEED_FIELDS
    made = np.ascontiguousarray(ahead.rows[:, lo:hi], dtype=np.int32)
    chains = walk.chains
    offsets, epochs, after = (chains.chunk_offsets(chunk_length[first:end]) if chains
                              else (np.zeros(1, np.int64), np.zeros(1, np.int32), None))
    while True:
        state = [np.ascontiguousarray(a).copy() for a in
                 ((chains.diag, chains.level, chains.saved, chains.count, chains.epoch)
                  if chains else (np.zeros(1, np.int32), np.zeros(1, np.int64),
                                  np.zeros(1, np.int32), np.zeros(1, np.int32),
                                  np.zeros(1, np.int32)))]
        hits = np.zeros((HIT_FIELDS, max(n, 1)), dtype=np.int32)
        arrays = [rows, made, walk.context_offset, walk.cutoff, offsets, epochs, *state, hits]
        p = [ctypes.c_void_p(a.ctypes.data) for a in arrays]
        found = host_pass(p[0], p[1], ctypes.c_longlong(n), ctypes.c_int(first),
                          ctypes.c_int(chains is not None), ctypes.c_longlong(walk.diag_len),
                          p[2], ctypes.c_int(walk.context_offset.size), p[3],
                          ctypes.c_int(walk.word_size), ctypes.c_int(walk.window), p[4], p[5],
                          p[6], p[7], p[8], p[9], p[10],
                          ctypes.c_int(chains.capacity if chains else 1),
                          ctypes.c_int(chains.lanes if chains else 1), p[11])
        if found >= 0:
            break
        chains.grow()
    if chains:
        chains.diag, chains.level, chains.saved, chains.count, chains.epoch = state
        chains.offset, chains.resets = after
    return initial_hits_of_rows(hits[:, :found])


def device_hits(host_pass, table, seeds, ahead, lengths, cutoff, window, diag_hash, groups):
    """The hits the device's pass finds over `groups` launches of consecutive chunks."""
    walk = diagonal_pass(table, cutoff, window, diag_hash)
    walk.context_offset = np.ascontiguousarray(table.context_offset, dtype=np.int32)
    bounds = np.linspace(0, lengths.size, groups + 1).astype(int)
    parts = [(0, run_launch(host_pass, seeds, ahead, a, b, walk, lengths))
             for a, b in zip(bounds[:-1], bounds[1:])]
    return sort_initial_hits(joined_initial_hits(parts))


@pytest.mark.parametrize("window", [0, 40])
@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize("task, qlens, reward, penalty, xdrop, cutoff", CASES)
def test_device_pass_finds_the_hosts_hits(host_kernel, host_pass, task, qlens, reward,  # noqa: F811
                                          penalty, xdrop, cutoff, groups, window):
    batch, options, table, packed, offsets, lengths = search_case(3 + sum(qlens), task, qlens,
                                                                  reward, penalty)
    seeds = find_seeds(table, packed, offsets, lengths)
    cut, rules = rules_of(batch, reward, penalty, xdrop, cutoff)
    ahead = UngappedAhead(kernel_rows(host_kernel, table, seeds, packed, offsets, lengths, rules))
    expected = extend_seeds(seeds, table, packed, offsets, lengths, rules.xdrop, cut,
                            rules.reduced_cutoff, reward, penalty, window=window,
                            diag_hash=DiagonalHash(1, window), ahead=ahead)
    got = device_hits(host_pass, table, seeds, ahead, lengths, cut, window,
                      device_hash(window, table), groups)
    assert len(expected) > 0
    for f in FIELDS:
        assert np.array_equal(getattr(expected, f), getattr(got, f)), f


def device_hash(window: int, table) -> DiagonalHash:
    """The hash a search gives the device: its buckets split into lanes where exact."""
    return DiagonalHash(1, window, device_hash_lanes(window, table.word_size))


def hash_case():
    task, qlens, reward, penalty, xdrop, cutoff = CASES[-1]
    assert sum(qlens) * 2 > 8000
    return search_case(11, task, qlens, reward, penalty), (reward, penalty, xdrop, cutoff)


@pytest.mark.parametrize("window", [0, 40])
def test_hash_carried_across_calls_and_reset(host_kernel, host_pass, window):  # noqa: F811
    """The same hash through two calls (a batch's volumes), its offset near the limit so
    that BLAST empties it between two chunks, and chains with room for one cell at first."""
    (batch, options, table, packed, offsets, lengths), (reward, penalty, xdrop, cutoff) = \
        hash_case()
    assert uses_diag_hash(table)
    seeds = find_seeds(table, packed, offsets, lengths)
    cut, rules = rules_of(batch, reward, penalty, xdrop, cutoff)
    ahead = UngappedAhead(kernel_rows(host_kernel, table, seeds, packed, offsets, lengths, rules))
    host_hash, on_device = DiagonalHash(1, window), device_hash(window, table)
    start = HASH_OFFSET_LIMIT - int(lengths[:3].sum()) - 100
    host_hash.offset = on_device.chains.offset = start
    on_device.chains.diag, on_device.chains.level, on_device.chains.saved = (
        a[:, :1].copy() for a in (on_device.chains.diag, on_device.chains.level,
                                  on_device.chains.saved))
    for _ in range(2):
        expected = extend_seeds(seeds, table, packed, offsets, lengths, rules.xdrop, cut,
                                rules.reduced_cutoff, reward, penalty, window=window,
                                diag_hash=host_hash, ahead=ahead)
        got = device_hits(host_pass, table, seeds, ahead, lengths, cut, window, on_device, 2)
        for f in FIELDS:
            assert np.array_equal(getattr(expected, f), getattr(got, f)), f
    assert on_device.chains.resets == 1
    assert on_device.chains.offset == host_hash.offset


def test_chains_that_outgrow_their_room(host_kernel, host_pass):  # noqa: F811
    """A query of one 512-letter unit repeated: a subject holding the unit gives seeds on
    diagonals 512 apart, all in one bucket and all live at once, so the chains grow."""
    rng = np.random.default_rng(5)
    unit = rng.integers(0, 4, 512).astype(np.uint8)
    options = make_options("blastn", dust="no")
    batch = build_batch([Query("q", "", np.tile(unit, 40), np.zeros(40 * 512, bool))], options)
    table = build_lookup(batch, options)
    subjects = [np.concatenate([rng.integers(0, 4, 300), unit, rng.integers(0, 4, 200), unit])
                .astype(np.uint8) for _ in range(3)]
    packed, offsets, lengths = pack_chunks(subjects)
    seeds = find_seeds(table, packed, offsets, lengths)
    cut, rules = rules_of(batch, 1, -2, 20, 19)
    ahead = UngappedAhead(kernel_rows(host_kernel, table, seeds, packed, offsets, lengths, rules))
    expected = extend_seeds(seeds, table, packed, offsets, lengths, rules.xdrop, cut,
                            rules.reduced_cutoff, 1, -2, diag_hash=DiagonalHash(1), ahead=ahead)
    device_hash = DiagonalHash(1)
    got = device_hits(host_pass, table, seeds, ahead, lengths, cut, 0, device_hash, 2)
    assert uses_diag_hash(table) and len(expected) > 0
    assert device_hash.chains.capacity > CHAIN_CELLS
    for f in FIELDS:
        assert np.array_equal(getattr(expected, f), getattr(got, f)), f


def crowded_case(seed: int, window: int) -> tuple:
    """Seeds made up to crowd a few of the hash's buckets, a few letters apart, on diagonals
    512 apart (so in different lanes of a bucket), their extensions (given ahead) ending
    near one another: many cells of one chain go stale at once. Returns the table, the
    seeds, their extensions, the chunk lengths, the cutoff, and the host pass's hits."""
    rng = np.random.default_rng(seed)
    options = make_options("blastn", dust="no")
    query = rng.integers(0, 4, 6000).astype(np.uint8)
    batch = build_batch([Query("q", "", query, np.zeros(query.size, bool))], options)
    table = build_lookup(batch, options)
    assert uses_diag_hash(table)
    n = 3000
    s_off = np.cumsum(rng.integers(0, 3, n)).astype(np.int32) + 600
    bucket = rng.integers(0, 3, n)
    diag = (512 * rng.integers(-1, 2, n) + 7 * bucket + 5).astype(np.int32)
    q_off = (s_off - diag).astype(np.int32)
    seeds = Seeds(np.zeros(n, np.int32), q_off, s_off, (s_off - rng.integers(0, 4, n)).astype(
        np.int32), s_off.copy())
    back = rng.integers(0, 6, n)
    rows = np.stack([q_off - back, s_off - back, rng.integers(11, 40, n),
                     rng.integers(17, 23, n)]).astype(np.int32)
    ahead = UngappedAhead(rows)
    lengths = np.array([int(s_off.max()) + 100], dtype=np.int32)
    offsets = np.zeros(1, dtype=np.int64)
    packed = np.zeros(int(lengths[0]) // 4 + 1, dtype=np.uint8)
    cut = np.full(batch.num_contexts, 20, np.int32)
    expected = extend_seeds(seeds, table, packed, offsets, lengths, cut, cut, cut, 1, -2,
                            window=window, diag_hash=DiagonalHash(1, window), ahead=ahead)
    assert 0 < len(expected) < n
    return table, seeds, ahead, lengths, cut, expected


def same_hits(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in FIELDS)


@pytest.mark.parametrize("window", [0, 11, 40])
@pytest.mark.parametrize("seed", range(6))
def test_crowded_buckets_reuse_the_cells_blast_reuses(host_pass, window, seed):
    """Which cell a new diagonal takes, and which diagonal's level is forgotten, decides hits
    where BLAST's chains are kept (one-hit seeds, and windows shorter than the word); from a
    window of the word size on the device splits each bucket into lanes of diagonals."""
    table, seeds, ahead, lengths, cut, expected = crowded_case(seed, window)
    lanes = device_hash_lanes(window, table.word_size)
    assert lanes == (32 if window >= table.word_size else 1)
    got = device_hits(host_pass, table, seeds, ahead, lengths, cut, window,
                      DiagonalHash(1, window, lanes), 1)
    assert same_hits(expected, got)


@pytest.mark.parametrize("seed", range(3))
def test_one_hit_seeds_need_blasts_chains(host_pass, seed):
    """Why one-hit seeds keep one chain a bucket: there a stale cell can still drop a later
    seed of its diagonal, so the bucket split into lanes (cells reused by other diagonals
    no longer) finds other hits than BLAST."""
    table, seeds, ahead, lengths, cut, expected = crowded_case(seed, 0)
    got = device_hits(host_pass, table, seeds, ahead, lengths, cut, 0, DiagonalHash(1, 0, 32), 1)
    assert not same_hits(expected, got)


@given(st.lists(st.integers(0, 90), max_size=40), st.integers(0, 200), st.integers(0, 2),
       st.sampled_from([0, 40]))
@example([100, 100, 5, 7], 100, 0, 0)  # a chunk walked at the limit exactly
def test_chunk_offsets_follow_the_hosts_chunk_loop(lengths, offset, resets, window):
    """HashChains.chunk_offsets, a run between resets at a time, gives each chunk the offset
    and reset count of _extend_into's loop over the chunks, one after the other (the limit
    lowered to LIMIT, so that a few short chunks reach it)."""
    chains = HashChains(window)
    chains.offset, chains.resets = offset, resets
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ungapped, "HASH_OFFSET_LIMIT", LIMIT)
        offsets, epochs, after = chains.chunk_offsets(np.array(lengths, dtype=np.int32))
    want_offsets, want_epochs = [], []
    for length in lengths:
        want_offsets.append(offset)
        want_epochs.append(resets)
        if offset >= LIMIT:
            offset, resets = window, resets + 1
        else:
            offset += length + window
    assert offsets.tolist() == want_offsets and epochs.tolist() == want_epochs
    assert after == (offset, resets)
