"""A scan that stops at a seed budget cuts chunks between slices; the ungapped stage carries a
cut chunk's diagonal state (array or hash) and hits to the next slice, so the initial hits are
those of the unsliced search, field by field and in order, for any budget; and the same
where a job scans slices ahead while it waits for its turn at the diagonal hash, and
extends them as one run."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.engine import ScannedSeeds, SubjectChunks, VolumeHits, stopping_initial_hits
from gblastn.lookup import build_lookup
from gblastn.options import make_options
from gblastn.query import Query, build_batch
from gblastn.scan import Seeds
from gblastn.scan.cpu import find_seeds, find_seeds_from
from gblastn.ungapped import HASH_OFFSET_LIMIT, DiagonalHash, extend_seeds, sort_initial_hits, \
    uses_diag_hash

from test_scan import make_case, pack_chunks

SEED_NAMES = ("chunk", "q_off", "s_off", "s_first", "hit_s")
FIELDS = ("chunk", "q_start", "s_start", "length", "score", "seed_q", "seed_s")
# (task, query lengths): the diagonal array (<= 8,000 query letters) and the hash (more)
ARRAY = ("blastn", [700, 500])
HASH = ("blastn", [5000, 4000])


def searched_case(seed: int, task: str, query_lengths: list, subject_lengths: list):
    rng = np.random.default_rng(seed)
    batch, options, subjects = make_case(rng, query_lengths, subject_lengths, task,
                                         n_plants=12)
    table = build_lookup(batch, options)
    packed, offsets, lengths = pack_chunks(subjects)
    nc = batch.num_contexts
    cutoffs = (np.full(nc, 22), np.full(nc, 25), np.full(nc, 20), 2, -3)
    return table, packed, offsets, lengths, cutoffs


def unsliced_hits(table, packed, offsets, lengths, cutoffs, hash_offset: int):
    seeds = find_seeds(table, packed, offsets, lengths)
    return extend_seeds(seeds, table, packed, offsets, lengths, *cutoffs,
                        diag_hash=fresh_hash(hash_offset))


def fresh_hash(offset: int) -> DiagonalHash:
    state = DiagonalHash()
    state.offset = offset
    return state


def sliced_hits(table, packed, offsets, lengths, cutoffs, budget: int, hash_offset: int,
                ahead: int = 1, by_score: bool = True):
    """engine.stopping_initial_hits over the chunks with the CPU scan stopped every `budget`
    seeds; also the runs extended, as (seeds, cut) per run. With `ahead` > 1 the extensions
    wait (as for a turn at the diagonal hash) until that many slices are scanned, or all.
    Without `by_score` each run's hits come unsorted, and the joined ones are sorted at the
    end (as a job does after its turn)."""
    k = lengths.size
    chunks = SubjectChunks(np.arange(k, dtype=np.int32), np.zeros(k, np.int64), offsets, lengths)
    state = fresh_hash(hash_offset)
    slices = []
    scans, filled = [], threading.Event()

    def scan_from(part, position, out):
        seeds, stop = find_seeds_from(table, packed, part.byte_offset, part.length, position,
                                      budget, out)
        scans.append(len(seeds))
        if len(scans) >= ahead or stop is None:
            filled.set()
        return ScannedSeeds(seeds), stop

    def extend(scanned, part, carry, cut):
        # a copy: the scan writes its next slices into this one's buffer once it is let go
        slices.append((Seeds(*(getattr(scanned.seeds, name).copy() for name in SEED_NAMES)), cut))
        return VolumeHits(extend_seeds(scanned.seeds, table, packed, part.byte_offset,
                                       part.length, *cutoffs, diag_hash=state, carry=carry,
                                       cut=cut, by_score=by_score))

    if ahead == 1:
        hits = stopping_initial_hits(chunks, scan_from, extend).hits
    else:
        hits = stopping_initial_hits(chunks, scan_from, extend, ahead, filled.wait).hits
    return (hits if by_score else sort_initial_hits(hits)), slices


def assert_same_hits(a, b):
    for f in FIELDS:
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


@pytest.mark.parametrize("task,query_lengths", [ARRAY, HASH], ids=["array", "hash"])
@pytest.mark.parametrize("hash_offset", [0, HASH_OFFSET_LIMIT - 1], ids=["fresh", "reset"])
def test_tiny_seed_budgets_cut_chunks_into_slices_with_the_unsliced_hits(task, query_lengths,
                                                                         hash_offset):
    """Each chunk in many slices (the hash emptied at the first chunk's end, when its offset
    starts just below the limit: a cut that moved the offset on would empty it early)."""
    case = searched_case(11, task, query_lengths, [4000, 40, 2500, 6001])
    assert uses_diag_hash(case[0]) == (query_lengths == HASH[1])
    reference = unsliced_hits(*case, hash_offset)
    assert len(reference) > 20
    whole = find_seeds(*case[:4])
    for budget in (1, 7, 64, 1000, len(whole), len(whole) + 1):
        hits, slices = sliced_hits(*case, budget, hash_offset)
        assert_same_hits(hits, reference)
        # the slices are the scan's seeds, in order, and at most `budget` each (a position
        # with more seeds than the budget comes whole)
        assert sum(len(seeds) for seeds, _ in slices) == len(whole)
        assert np.array_equal(np.concatenate([s.hit_s for s, _ in slices]), whole.hit_s)
        cuts = sum(cut for _, cut in slices)
        if budget <= 7:
            assert cuts > 10
        if budget < len(whole):
            assert len(slices) > 1
        if budget >= len(whole):
            assert len(slices) == 1 and cuts == 0


def test_a_position_with_more_seeds_than_the_budget_comes_whole():
    """A query of repeats lists many offsets for one word: the scan takes such a position
    whole rather than stopping before it for ever."""
    options = make_options("blastn", dust="no")
    rng = np.random.default_rng(3)
    repeats = np.tile(np.array([0, 1, 2, 3], np.uint8), 300)
    query = np.concatenate([rng.integers(0, 4, 200).astype(np.uint8), repeats])
    batch = build_batch([Query("q", "", query, np.zeros(query.size, bool))], options)
    subject = rng.integers(0, 4, 1500).astype(np.uint8)
    subject[200:1400] = repeats
    table = build_lookup(batch, options)
    packed, offsets, lengths = pack_chunks([subject, rng.integers(0, 4, 800).astype(np.uint8)])
    cutoffs = (np.full(2, 22), np.full(2, 25), np.full(2, 20), 2, -3)
    whole = find_seeds(table, packed, offsets, lengths)
    seeds, stop = find_seeds_from(table, packed, offsets, lengths, 0, 2)
    assert stop is not None and len(seeds) > 100
    assert np.array_equal(seeds.hit_s, whole.hit_s[:len(seeds)])
    case = (table, packed, offsets, lengths, cutoffs)
    assert_same_hits(sliced_hits(*case, 2, 0)[0], unsliced_hits(*case, 0))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), budget=st.integers(1, 300), hashed=st.booleans(),
       subject_lengths=st.lists(st.integers(1, 3000), min_size=1, max_size=4))
def test_any_seed_budget_gives_the_unsliced_hits(seed, budget, hashed, subject_lengths):
    task, query_lengths = HASH if hashed else ARRAY
    case = searched_case(seed, task, query_lengths, subject_lengths)
    assert_same_hits(sliced_hits(*case, budget, 0)[0], unsliced_hits(*case, 0))


@pytest.mark.parametrize("task,query_lengths", [ARRAY, HASH], ids=["array", "hash"])
def test_slices_scanned_ahead_of_a_turn_are_extended_as_one_run_with_the_unsliced_hits(
        task, query_lengths):
    case = searched_case(11, task, query_lengths, [4000, 40, 2500, 6001])
    reference = unsliced_hits(*case, 0)
    for budget, ahead in ((7, 3), (7, 50), (64, 4)):
        hits, runs = sliced_hits(*case, budget, 0, ahead)
        assert_same_hits(hits, reference)
        # the first run holds the slices scanned before the turn: `ahead` of them
        assert len(runs[0][0]) > budget and len(runs) < len(find_seeds(*case[:4])) / budget


@pytest.mark.parametrize("task,query_lengths", [ARRAY, HASH], ids=["array", "hash"])
def test_runs_extended_unsorted_and_sorted_after_give_the_unsliced_hits(task, query_lengths):
    """A job in its turn at the diagonal hash leaves its runs' hits unsorted and unmerged,
    each with the order its seed was found in (extend_seeds' by_score=False, the keys going
    on from run to run through the CutChunk), and sorts them all once its turn is passed
    on: the very hits, in the very order, of the unsliced search, whatever the cuts."""
    case = searched_case(11, task, query_lengths, [4000, 40, 2500, 6001])
    reference = unsliced_hits(*case, 0)
    whole = find_seeds(*case[:4])
    for budget, ahead in ((1, 1), (7, 1), (7, 3), (64, 4), (len(whole), 1)):
        hits, runs = sliced_hits(*case, budget, 0, ahead, by_score=False)
        assert_same_hits(hits, reference)
        assert hits.found is None
        if budget < 64:
            assert sum(cut for _, cut in runs) > 0


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), budget=st.integers(1, 300), hashed=st.booleans(),
       unsorted=st.booleans(), subject_lengths=st.lists(st.integers(1, 3000), min_size=1,
                                                       max_size=4))
def test_any_budget_with_the_hits_sorted_after_the_runs_gives_the_unsliced_hits(
        seed, budget, hashed, unsorted, subject_lengths):
    task, query_lengths = HASH if hashed else ARRAY
    case = searched_case(seed, task, query_lengths, subject_lengths)
    assert_same_hits(sliced_hits(*case, budget, 0, 3, by_score=not unsorted)[0],
                     unsliced_hits(*case, 0))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), budget=st.integers(1, 300), hashed=st.booleans(),
       ahead=st.integers(2, 6),
       subject_lengths=st.lists(st.integers(1, 3000), min_size=1, max_size=4))
def test_any_scan_ahead_gives_the_unsliced_hits(seed, budget, hashed, ahead, subject_lengths):
    task, query_lengths = HASH if hashed else ARRAY
    case = searched_case(seed, task, query_lengths, subject_lengths)
    assert_same_hits(sliced_hits(*case, budget, 0, ahead)[0], unsliced_hits(*case, 0))


def test_a_failed_scan_ahead_fails_the_extensions():
    table, packed, offsets, lengths, cutoffs = searched_case(11, *HASH, [4000, 40, 2500, 6001])
    chunks = SubjectChunks(np.arange(lengths.size, dtype=np.int32),
                           np.zeros(lengths.size, np.int64), offsets, lengths)
    scans = []

    def scan_from(part, position, out):
        scans.append(position)
        if len(scans) == 3:
            raise MemoryError("no room for the seeds")
        seeds, stop = find_seeds_from(table, packed, part.byte_offset, part.length, position, 7)
        return ScannedSeeds(seeds), stop

    def extend(scanned, part, carry, cut):
        return VolumeHits(extend_seeds(scanned.seeds, table, packed, part.byte_offset,
                                       part.length, *cutoffs, carry=carry, cut=cut))

    with pytest.raises(MemoryError, match="no room"):
        stopping_initial_hits(chunks, scan_from, extend, 4, lambda: None)
    with pytest.raises(MemoryError, match="no room"):
        scans.clear()
        stopping_initial_hits(chunks, scan_from, extend)


def test_a_seed_run_joins_slices_with_their_chunks_renumbered(monkeypatch):
    """engine.SeedRun: successive slices' seeds end to end, each slice's chunks shifted to
    the run's numbering, the buffer grown past the slices it was made for (a slice may hold
    more seeds than the budget: a scan position's seeds are taken whole)."""
    from gblastn import engine
    from gblastn.scan import Seeds

    monkeypatch.setattr(engine, "SEED_BUDGET", 1)
    rng = np.random.default_rng(7)

    def random_seeds(n):
        return Seeds(*(rng.integers(0, 1000, n, dtype=np.int32) for _ in range(5)))

    slices = [(0, random_seeds(3)), (2, random_seeds(0)), (2, random_seeds(5)),
              (4, random_seeds(2))]
    run = engine.SeedRun(slices[0][1], 2)
    for shift, seeds in slices[1:]:
        run.add(seeds, shift)
    joined = run.seeds()
    assert np.array_equal(joined.chunk, np.concatenate([s.chunk + shift for shift, s in slices]))
    for name in ("q_off", "s_off", "s_first", "hit_s"):
        assert np.array_equal(getattr(joined, name),
                              np.concatenate([getattr(s, name) for _, s in slices]))


def test_the_slices_are_scanned_into_a_few_buffers_used_again(monkeypatch):
    """Each slice's buffer is used again once its extension has let its seeds go: a job's
    slices take three buffers at most, whatever their number, with the unsliced hits (one
    slice ahead of the extensions; further ahead none is kept)."""
    from gblastn import arrays, engine

    monkeypatch.setattr(engine, "SEED_BUDGET", 7)

    made = []

    def counted(count, dtype=np.uint8):
        made.append(count)
        return fresh_pages(count, dtype)

    fresh_pages = arrays.fresh_pages
    monkeypatch.setattr(arrays, "fresh_pages", counted)
    case = searched_case(11, *HASH, [4000, 40, 2500, 6001])
    reference = unsliced_hits(*case, 0)
    for ahead in (1, 3):
        made.clear()
        hits, slices = sliced_hits(*case, 7, 0, ahead)
        assert_same_hits(hits, reference)
        if ahead == 1:
            assert len(slices) > 20 and 1 <= len(made) <= 3
        else:
            assert len(made) >= len(slices) > 20
