"""The search drivers: serial and pipeline modes give identical output for any thread count
and any split of the gapped stage, volumes scanned once serve every job, the task pools run
the most urgent work first, a failing stage stops the run cleanly, an interrupt leaves no
partial output, and the warm-up reaches every stage a search uses."""

import collections
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golden import megablast_case, mutate, random_dna, write_fasta
from reliability import sigint_by_default
from test_diagonals_kernel import host_pass  # noqa: F401 - the fixture

from gblastn.options import make_options
from gblastn.query import Query
from gblastn.scan.backend import Capabilities, CpuBackend

COLUMNS = "7 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore score"


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    from gblastn.db.writer import make_db

    folder = tmp_path_factory.mktemp("pipeline")
    db_fasta, queries = megablast_case(str(folder))
    return {"db": make_db([db_fasta], str(folder / "db"), progress=False),
            "query": queries["small"], "folder": folder}


def search(case, mode: str, threads: int, name: str, backend=None, task="megablast") -> str:
    from gblastn.options import make_options
    from gblastn.drivers.run import OutputSpec, RunSettings, run_search

    out = str(case["folder"] / name)
    run_search([case["query"]], case["db"], make_options(task, num_threads=threads),
               OutputSpec(COLUMNS, out, None, "db"), backend, settings=RunSettings(mode))
    with open(out) as handle:
        return handle.read()


def test_modes_and_thread_counts_give_identical_output(case):
    reference = search(case, "serial", 1, "serial1.out")
    assert "hits found" in reference and reference.count("\n") > 20
    for mode, threads in [("serial", 2), ("pipeline", 1), ("pipeline", 2), ("pipeline", 8)]:
        assert search(case, mode, threads, f"{mode}{threads}.out") == reference, (mode, threads)


def test_gapped_stage_in_pieces_by_context_gives_identical_output(case, monkeypatch):
    from gblastn import engine

    reference = search(case, "serial", 1, "serial-whole-chunks.out")
    split = []
    real = engine.context_pieces

    def spy(contexts, lo, hi, parts):
        pieces = real(contexts, lo, hi, parts)
        split.append(len(pieces))
        return pieces

    monkeypatch.setattr(engine, "MIN_PIECE_HITS", 1)
    monkeypatch.setattr(engine, "context_pieces", spy)
    assert search(case, "serial", 4, "serial-pieces.out") == reference
    assert search(case, "pipeline", 4, "pipeline-pieces.out") == reference
    assert max(split) > 1
    # chunks with more hits than a piece holds are cut on one thread too
    split.clear()
    monkeypatch.setattr(engine, "PIECE_HITS", 2)
    assert search(case, "serial", 1, "serial-small-pieces.out") == reference
    assert max(split) > 4


def test_gapped_extensions_spread_over_the_pool_give_identical_output(case, monkeypatch):
    from gblastn import gapped

    monkeypatch.setattr(gapped, "HEAVY_LETTERS", 10**12)
    reference = search(case, "serial", 1, "serial-in-order.out")
    monkeypatch.setattr(gapped, "HEAVY_LETTERS", 0)  # every piece extended ahead
    assert search(case, "serial", 4, "serial-ahead.out") == reference
    assert search(case, "pipeline", 8, "pipeline-ahead.out") == reference


def test_context_pieces_hold_whole_contexts_in_hit_order():
    from gblastn.engine import context_pieces

    rng = np.random.default_rng(5)
    contexts = rng.integers(0, 9, 5000)
    pieces = context_pieces(contexts, 1000, 4000, 4)
    assert len(pieces) == 4
    every = np.concatenate(pieces)
    assert np.array_equal(np.sort(every), np.arange(3000))
    for piece in pieces:
        assert np.all(np.diff(piece) > 0)
    owners = [{int(c) for c in contexts[1000 + piece]} for piece in pieces]
    assert sum(len(o) for o in owners) == len(set().union(*owners))  # no context shared
    assert context_pieces(contexts, 0, 100, 4) == [None]          # too few hits to split
    assert context_pieces(np.zeros(5000, dtype=np.int64), 0, 5000, 4) == [None]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 400), st.integers(1, 9), st.integers(0, 2**32 - 1))
def test_context_pieces_fill_the_lightest_piece_first(kinds, parts, seed):
    """Each context, the most hit first, goes to the lightest piece so far, the first of
    those tied (the pieces a loop over the loads' argmin gives)."""
    from gblastn.engine import MIN_PIECE_HITS, context_pieces

    contexts = np.random.default_rng(seed).integers(0, kinds, MIN_PIECE_HITS * 12)
    pieces = context_pieces(contexts, 0, contexts.size, parts)
    names, rank, counts = np.unique(contexts, return_inverse=True, return_counts=True)
    if pieces == [None]:
        assert min(parts, contexts.size // MIN_PIECE_HITS) <= 1 or names.size == 1
        return
    load = np.zeros(min(parts, names.size), dtype=np.int64)
    piece_of = np.empty(names.size, dtype=np.int64)
    for k in np.argsort(-counts, kind="stable"):
        piece_of[k] = int(np.argmin(load))
        load[piece_of[k]] += counts[k]
    expected = [np.flatnonzero(piece_of[rank] == p) for p in range(load.size)]
    assert len(pieces) == len(expected)
    assert all(np.array_equal(a, b) for a, b in zip(pieces, expected))


def test_priority_pool_runs_the_most_urgent_first_and_cancels_on_close():
    import threading

    from gblastn.pools import PriorityPool

    pool = PriorityPool(1)
    gate, ran = threading.Event(), []
    blocker = pool.submit((0,), gate.wait)
    futures = [pool.submit((1, -work), ran.append, work) for work in (3, 9, 1)]
    futures.append(pool.submit((0,), ran.append, "gapped"))
    gate.set()
    blocker.result()
    for future in futures:
        future.result()
    assert ran == ["gapped", 9, 3, 1]
    with pytest.raises(ZeroDivisionError):
        pool.submit((0,), lambda: 1 / 0).result()
    assert pool.map(lambda x: x * x, range(5)) == [0, 1, 4, 9, 16]
    gate.clear()
    blocker = pool.submit((0,), gate.wait)
    waiting = pool.submit((0,), ran.append, "never")
    pool.close()
    gate.set()
    assert waiting.cancelled() and "never" not in ran
    assert pool.submit((0,), ran.append, "late").cancelled()


@given(st.lists(st.integers(min_value=0, max_value=50), max_size=40),
       st.integers(min_value=1, max_value=120))
def test_runs_keep_the_order_and_reach_their_share(weights, share):
    """runs_of: every item once, in order; each run but the last weighs at least the share,
    and would not without its last item."""
    from gblastn.pools import runs_of

    runs = runs_of(list(range(len(weights))), weights, share)
    assert [i for run in runs for i in run] == list(range(len(weights)))
    for run in runs[:-1]:
        assert sum(weights[i] for i in run) >= share > sum(weights[i] for i in run[:-1])


@pytest.mark.parametrize("kind", ["priority", "task"])
def test_spread_inside_busy_pool_tasks_finishes_every_call(kind):
    import threading

    from gblastn.pools import PriorityPool, TaskPool

    pool = PriorityPool(2) if kind == "priority" else TaskPool(2)
    done, lock = [], threading.Lock()

    def piece(p):
        # every worker runs a piece that spreads: helpers queue behind the pieces, and each
        # piece must finish its calls without waiting for them
        def call(k):
            with lock:
                done.append((p, k))
        pool.spread(call, 25)
        return p

    try:
        assert pool.map(piece, range(4)) == [0, 1, 2, 3]
        assert sorted(done) == [(p, k) for p in range(4) for k in range(25)]

        def fails(k):
            if k == 7:
                raise ValueError("injected")
        with pytest.raises(ValueError, match="injected"):
            pool.spread(fails, 10)
    finally:
        pool.close()


def test_spreads_on_threads_share_helpers_kept_for_the_process():
    """on_threads: every index once, by the caller and helper threads kept from one call to
    the next (no thread started per call); spreads from several threads at once all finish;
    an error is raised in the caller."""
    import threading
    import time

    from gblastn.pools import on_threads

    spread = on_threads(4)
    ran, lock = [], threading.Lock()

    def call(k):
        time.sleep(0.002)  # long enough for the helpers to join in
        with lock:
            ran.append((k, threading.current_thread().name))
    spread(call, 40)
    assert sorted(k for k, _ in ran) == list(range(40))
    before = threading.active_count()
    spread(call, 40)
    assert threading.active_count() == before
    assert any(name.startswith("gblastn-spread") for _, name in ran)
    done = [[] for _ in range(6)]
    callers = [threading.Thread(target=lambda j=j: on_threads(4)(done[j].append, 30))
               for j in range(6)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(timeout=30)
    assert [sorted(d) for d in done] == [list(range(30))] * 6

    def fails(k):
        if k == 3:
            raise ValueError("injected")
    with pytest.raises(ValueError, match="injected"):
        spread(fails, 8)
    assert on_threads(1)(done[0].append, 0) is None


def test_traceback_waits_for_the_whole_batch_when_a_hit_list_limit_can_bind(case,
                                                                          monkeypatch):
    from gblastn import engine

    # ten subjects: with room for fewer, a subject's traceback must wait for every job, since
    # a later job's subjects may push it out of its query's preliminary hit list
    unlimited = search(case, "serial", 1, "serial-unlimited.out")
    monkeypatch.setattr(engine, "prelim_hitlist_size", lambda options: 3)
    reference = search(case, "serial", 1, "serial-limited.out")
    assert most_subjects_of_a_query(unlimited) > 3 >= most_subjects_of_a_query(reference)
    assert search(case, "pipeline", 8, "pipeline-limited.out") == reference


def most_subjects_of_a_query(output: str) -> int:
    pairs = {tuple(line.split("\t")[:2]) for line in output.splitlines()
             if line and not line.startswith("#")}
    queries = [q for q, _ in pairs]
    return max(queries.count(q) for q in set(queries))


class WholeVolumeScans(CpuBackend):
    """The CPU backend, declared to scan whole volumes (as the GPU backend does)."""

    capabilities = Capabilities(scans_whole_volumes=True)

    def __init__(self):
        self.calls = 0

    def find_seeds(self, *args):
        self.calls += 1
        return super().find_seeds(*args)


def test_a_volume_scanned_once_serves_every_job_of_it(case):
    reference = search(case, "serial", 1, "serial-ref.out")
    backend = WholeVolumeScans()
    assert search(case, "pipeline", 8, "whole-volume.out", backend) == reference
    # two batches (blastn's first holds 5,000 letters), one volume, many jobs
    assert backend.calls == 2


def test_whole_volume_hits_keep_the_diagonal_hash_in_database_order(case, monkeypatch):
    from gblastn import engine, ungapped
    from gblastn.db.reader import open_db
    from gblastn.db.writer import make_db
    from gblastn.options import make_options
    from gblastn.query import read_queries
    from gblastn.timing import StageTimes

    volumes = {**case, "db": make_db([str(case["folder"] / "db.fa")],
                                     str(case["folder"] / "db-volumes"), max_file_sz="20KB",
                                     progress=False)}
    with open_db(volumes["db"]) as db:
        assert len(db.volumes) >= 3
        table = engine.plan_batch(read_queries(case["query"]), 0, db,
                                  make_options("megablast"), StageTimes()).table
        assert ungapped.uses_diag_hash(table)
    reference = search(volumes, "serial", 1, "serial-volumes.out")
    extended = _counting_extensions(monkeypatch)
    backend = WholeVolumeScans()
    assert search(volumes, "pipeline", 8, "whole-volume-hits.out", backend) == reference
    # each volume scanned and extended once per batch (two: blastn's first holds 5,000
    # letters), though 8 threads cut it into many jobs
    assert backend.calls == len(extended) == 2 * len(db.volumes)


def _counting_extensions(monkeypatch) -> list:
    """The seed counts of every call of the ungapped stage, as a list that grows with them."""
    from gblastn import ungapped

    extended = []
    real = ungapped.extend_seeds

    def spy(seeds, *args, **kwargs):
        extended.append(len(seeds))
        return real(seeds, *args, **kwargs)

    monkeypatch.setattr(ungapped, "extend_seeds", spy)
    return extended


@pytest.mark.parametrize("task", ["blastn", "megablast"])
def test_hits_sorted_after_the_turn_give_identical_output(case, monkeypatch, task):
    """With 4 threads a job's turn at the diagonal hash spreads the hash's parts, and its
    hits are put in each chunk's order by score once the turn is passed on: the output is
    the one-thread search's."""
    from gblastn import ungapped

    deferred = []
    real = ungapped.extend_seeds

    def spy(*args, **kwargs):
        deferred.append(kwargs.get("by_score") is False)
        return real(*args, **kwargs)

    reference = search(case, "serial", 1, f"turn-sorted-ref-{task}.out", task=task)
    monkeypatch.setattr(ungapped, "extend_seeds", spy)
    assert search(case, "pipeline", 4, f"turn-sorted-{task}.out", task=task) == reference
    assert any(deferred)


def test_volumes_scanned_and_extended_in_slices_give_identical_output(case, monkeypatch):
    """A volume is scanned and extended slice after slice (bounded memory); with slices of
    one chunk, or as many letters as a few seeds need, or, where the CPU's scan stops at a
    seed budget, of a few seeds cut from within chunks, the output is the same in every
    mode, the diagonal hash seeing the slices in database order."""
    from gblastn import engine

    reference = search(case, "serial", 1, "serial-unsliced.out")
    extended = _counting_extensions(monkeypatch)
    monkeypatch.setattr(engine, "FIRST_SLICE_LETTERS", 1)
    for seeds_per_slice in (1, 200):
        monkeypatch.setattr(engine, "SLICE_SEEDS", seeds_per_slice)
        monkeypatch.setattr(engine, "SEED_BUDGET", seeds_per_slice)
        for mode, threads, backend in (("serial", 1, None), ("pipeline", 4, None),
                                       ("pipeline", 8, WholeVolumeScans())):
            extended.clear()
            out = search(case, mode, threads, f"sliced-{seeds_per_slice}-{mode}{threads}.out",
                         backend)
            assert out == reference, (seeds_per_slice, mode, threads)
            assert len(extended) > 2


class UngappedAheadScans(WholeVolumeScans):
    """The CPU backend, declared to make every seed's ungapped extension ahead (as the GPU
    backend does), making them with ungapped.py's functions; `damage` alters them."""

    capabilities = Capabilities(scans_whole_volumes=True, ungapped_ahead=True)

    def __init__(self, damage: int = 0):
        super().__init__()
        self.damage = damage

    def extended_seeds(self, table, subjects, chunk_byte_offset, chunk_length, rules):
        from test_ungapped_kernel import numba_rows

        from gblastn.layouts import UNGAPPED_SCORE
        from gblastn.ungapped import UngappedAhead

        seeds = self.find_seeds(table, subjects, chunk_byte_offset, chunk_length)
        rows = numba_rows(table, seeds, subjects.packed, chunk_byte_offset, chunk_length, rules)
        rows[UNGAPPED_SCORE] -= self.damage
        return seeds, UngappedAhead(rows)


def test_extensions_made_ahead_are_looked_up_for_identical_output(case, monkeypatch):
    """With a backend that makes the seeds' ungapped extensions ahead, slice after slice,
    every mode gives the output of the CPU alone; and the engine uses them (extensions
    made ahead with scores below every cutoff leave no hit to report)."""
    from gblastn import engine

    reference = search(case, "serial", 1, "serial-alone.out")
    monkeypatch.setattr(engine, "FIRST_SLICE_LETTERS", 1)
    monkeypatch.setattr(engine, "SLICE_SEEDS", 200)
    for mode, threads in (("serial", 1), ("pipeline", 8)):
        backend = UngappedAheadScans()
        assert search(case, mode, threads, f"ahead-{mode}.out", backend) == reference
        assert backend.calls > 2
    assert search(case, "serial", 1, "ahead-damaged.out", UngappedAheadScans(1000)) != reference


class DevicePassScans(UngappedAheadScans):
    """The CPU backend, declared to make the ungapped stage's in-order pass on the device
    (as the GPU backend does), making it with cuda/diagonals.cu compiled for the host, each
    call's chunks in two launches; `damage` alters the extensions it looks up."""

    capabilities = Capabilities(scans_whole_volumes=True, ungapped_ahead=True,
                                diagonals_on_device=True)

    def __init__(self, host_pass, damage: int = 0):
        super().__init__(damage)
        self.host_pass = host_pass

    def initial_hits(self, table, subjects, chunk_byte_offset, chunk_length, rules, walk):
        from test_diagonals_kernel import run_launch

        from gblastn.ungapped import joined_initial_hits, sort_initial_hits

        seeds, ahead = self.extended_seeds(table, subjects, chunk_byte_offset, chunk_length,
                                           rules)
        walk.context_offset = np.ascontiguousarray(table.context_offset, dtype=np.int32)
        half = chunk_length.size // 2
        parts = [(0, run_launch(self.host_pass, seeds, ahead, first, end, walk, chunk_length))
                 for first, end in ((0, half), (half, chunk_length.size))]
        return sort_initial_hits(joined_initial_hits(parts)), len(seeds)


@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_the_device_pass_gives_identical_output(case, monkeypatch, host_pass, task):
    """With a backend that makes the in-order pass on the device, over volumes that carry
    the diagonal hash from one to the next, slice after slice, every mode gives the output
    of the CPU alone (damaged extensions change it)."""
    from gblastn import engine
    from gblastn.db.writer import make_db

    volumes = {**case, "db": make_db([str(case["folder"] / "db.fa")],
                                     str(case["folder"] / "db-pass"), max_file_sz="20KB",
                                     progress=False)}
    reference = search(volumes, "serial", 1, f"pass-alone-{task}.out", task=task)
    monkeypatch.setattr(engine, "FIRST_SLICE_LETTERS", 1)
    monkeypatch.setattr(engine, "DEVICE_SLICE_SEEDS", 200)
    for mode, threads in (("serial", 1), ("pipeline", 8)):
        backend = DevicePassScans(host_pass)
        assert search(volumes, mode, threads, f"pass-{mode}-{task}.out", backend,
                      task=task) == reference
        assert backend.calls > 2
    assert search(volumes, "serial", 1, f"pass-damaged-{task}.out",
                  DevicePassScans(host_pass, 1000), task=task) != reference


class DpAheadScans(WholeVolumeScans):
    """The CPU backend, declared to make the initial hits' DP extensions ahead (as the GPU
    backend does), making them with dynprog.py and leaving every third to the gapped
    stage; `damage` alters the scores of those it makes."""

    capabilities = Capabilities(scans_whole_volumes=True, dp_ahead=True)

    def __init__(self, damage: int = 0):
        super().__init__()
        self.damage, self.made = damage, 0

    def dp_extensions(self, subjects, chunk_byte_offset, chunk_length, hits, contexts, batch,
                      matrix, gap_open, gap_extend, xdrop):
        from gblastn.dynprog import prelim_dp_extend
        from gblastn.layouts import GAPPED_FIELDS, GAPPED_SCORE

        out = np.zeros((len(hits), GAPPED_FIELDS + 1), dtype=np.int64)
        for i in range(0, len(hits)):
            if i % 3 == 2:
                continue
            c, base = int(hits.chunk[i]), int(batch.context_offset[contexts[i]])
            query = batch.sequence[base:base + int(batch.context_length[contexts[i]])]
            packed = subjects.packed[int(chunk_byte_offset[c]):]
            out[i, :GAPPED_FIELDS] = prelim_dp_extend(
                query, packed, int(chunk_length[c]), int(hits.seed_q[i]) - base,
                int(hits.seed_s[i]), int(hits.s_start[i]), int(hits.length[i]),
                int(hits.score[i]), matrix.astype(np.int64), gap_open, gap_extend, xdrop)
            out[i, GAPPED_SCORE] -= self.damage
            out[i, GAPPED_FIELDS] = 1
        self.made += len(hits)
        return out


def test_dp_extensions_made_ahead_are_looked_up_for_identical_output(case, monkeypatch):
    """With a backend that makes the initial hits' DP extensions ahead (-task blastn), slice
    after slice, every mode gives the output of the CPU alone, the chunks going to the
    gapped stage in runs; and the engine uses them (damaged ones change the output)."""
    from gblastn import engine, gapped

    reference = search(case, "serial", 1, "dp-alone.out", task="blastn")
    monkeypatch.setattr(engine, "FIRST_SLICE_LETTERS", 1)
    monkeypatch.setattr(engine, "SLICE_SEEDS", 200)
    runs = []
    real = gapped.extend_chunks_dp_given
    monkeypatch.setattr(gapped, "extend_chunks_dp_given",
                        lambda chunks, *args: runs.append(chunks.size) or real(chunks, *args))
    for mode, threads in (("serial", 1), ("pipeline", 8)):
        backend = DpAheadScans()
        assert search(case, mode, threads, f"dp-ahead-{mode}.out", backend,
                      task="blastn") == reference
        assert backend.made > 0
    assert runs and max(runs) > 1
    assert search(case, "serial", 1, "dp-damaged.out", DpAheadScans(5),
                  task="blastn") != reference


def test_the_next_batch_is_sized_before_the_extensions_ahead_are_made(case, monkeypatch):
    """A batch's size waits for the previous batch's ungapped stage; the GPU's extensions
    ahead come after that count, made once per volume after all of its slices, so the next
    batch is planned and scanned while they are made."""
    from gblastn import engine
    from gblastn.drivers import pipeline

    events = []
    real_count = pipeline._ExtensionCounts.count
    monkeypatch.setattr(pipeline._ExtensionCounts, "count", lambda self, batch, extensions:
                        events.append("counted") or real_count(self, batch, extensions))
    monkeypatch.setattr(engine, "FIRST_SLICE_LETTERS", 1)
    monkeypatch.setattr(engine, "SLICE_SEEDS", 200)

    class Recording(DpAheadScans):
        def dp_extensions(self, *args):
            events.append("made")
            return super().dp_extensions(*args)

    assert search(case, "pipeline", 1, "dp-after-count.out", Recording(), task="blastn") == \
        search(case, "serial", 1, "dp-after-count-ref.out", task="blastn")
    assert events.count("made") >= 2
    assert all(before == "counted" for before, event in zip(events, events[1:])
               if event == "made")


def _planned_batches(monkeypatch, second_begins=None) -> list:
    """(first query number, queries) of every batch the pipeline plans, in the order the
    plans begin; `second_begins` (an Event) is set as the second plan begins."""
    from gblastn.drivers import pipeline

    planned = []
    real = pipeline.Pipeline._plan

    def spy(self, items):
        planned.append((items[0][0], len(items)))
        if len(planned) == 2 and second_begins is not None:
            second_begins.set()
        return real(self, items)

    monkeypatch.setattr(pipeline.Pipeline, "_plan", spy)
    return planned


def test_the_second_batch_is_planned_before_the_first_count(case, monkeypatch):
    """The second batch's plan begins beside the first batch's search: the first count,
    held back until it has, lets the search end with the serial search's output."""
    from gblastn.drivers import pipeline

    reference = search(case, "serial", 1, "guess-ref.out")
    began, waited = threading.Event(), []
    planned = _planned_batches(monkeypatch, began)
    real_report = pipeline._ExtensionCounts._report

    def report(self, batch_id):
        if batch_id == 0:
            waited.append(began.wait(10))
        real_report(self, batch_id)

    monkeypatch.setattr(pipeline._ExtensionCounts, "_report", report)
    assert search(case, "pipeline", 2, "guessed.out") == reference
    assert waited == [True]
    # the guess held: every batch planned once, the second from the first one's end on
    assert [first for first, _ in planned] == \
        list(np.cumsum([0] + [count for _, count in planned[:-1]]))


def test_a_wrong_guess_is_dropped_and_the_batch_planned_again(case, monkeypatch):
    """Batches after the first sized below the guess (a few hundred letters): the guessed
    second batch is dropped and planned again at its true size, with the serial output."""
    from gblastn.drivers import Search
    from gblastn.engine import QueryBatchSizes

    class SmallBatches(QueryBatchSizes):
        def searched(self, extensions):
            self.letters = 300

    monkeypatch.setattr(Search, "batch_sizes", lambda self: SmallBatches(
        self.options.task, int(self.db.total_letters)))
    reference = search(case, "serial", 1, "small-batches-ref.out")
    planned = _planned_batches(monkeypatch)
    assert search(case, "pipeline", 2, "small-batches.out") == reference
    first, guessed = planned[0][1], planned[1]
    assert guessed[0] == first and planned[2][0] == first and guessed[1] > planned[2][1]
    assert len(planned) > 3


def _hits_of(results: list) -> list:
    return [(r.query_index, [(s.ordinal, s.hsps.score.tolist(), s.hsps.s_start.tolist())
                             for s in r.subjects]) for r in results]


def test_a_given_batch_is_searched_whole_as_the_serial_driver_does(case, monkeypatch):
    """A Pipeline given one batch formed by its caller (a cluster worker's) searches it whole
    (blastn's batches here would hold a query or two), its queries numbered from the
    batch's first: the serial driver's results, and the batch's count of extensions told
    on it."""
    from gblastn.db.reader import open_db
    from gblastn.drivers import Search
    from gblastn.engine import QueryBatchSizes
    from gblastn.drivers.pipeline import GivenBatch, Pipeline
    from gblastn.drivers.run import RunSettings
    from gblastn.drivers.serial import search_batch
    from gblastn.query import read_queries
    from gblastn.timing import StageTimes

    class SmallBatches(QueryBatchSizes):
        def __init__(self, *args):
            super().__init__(*args)
            self.letters = 300

    monkeypatch.setattr(Search, "batch_sizes", lambda self: SmallBatches(
        self.options.task, int(self.db.total_letters)))
    planned = _planned_batches(monkeypatch)
    queries = read_queries(case["query"])[3:9]
    db = open_db(case["db"])
    try:
        def fresh_search():
            return Search(db, make_options("megablast", num_threads=2), StageTimes(),
                          CpuBackend())

        given = GivenBatch(first_index=3)
        results = list(Pipeline(fresh_search(), queries, RunSettings(),
                                lambda pairs: [result for _, result in pairs], given).texts())
        expected, extensions = search_batch(fresh_search(), queries, 3)
        assert given.extensions.result(timeout=0) == extensions > 0
        assert planned == [(3, 6)]
        assert [result.query_index for result in results] == list(range(3, 9))
        assert _hits_of(results) == _hits_of(expected)
        assert sum(len(result.subjects) for result in results) > 0
    finally:
        db.close()


def test_given_batches_side_by_side_share_a_pool_that_outlives_them(case):
    """Two given batches run at once on one PriorityPool (a cluster worker's runs share
    one): each gives the serial driver's results, and the pool stays open after them."""
    from concurrent.futures import ThreadPoolExecutor

    from gblastn.db.reader import open_db
    from gblastn.drivers import Search
    from gblastn.drivers.pipeline import GivenBatch, Pipeline
    from gblastn.drivers.run import RunSettings
    from gblastn.drivers.serial import search_batch
    from gblastn.pools import PriorityPool
    from gblastn.query import read_queries
    from gblastn.timing import StageTimes

    queries = read_queries(case["query"])
    db = open_db(case["db"])
    pool = PriorityPool(2)
    try:
        def fresh_search():
            return Search(db, make_options("megablast", num_threads=2), StageTimes(),
                          CpuBackend())

        def run(number, first, last):
            return list(Pipeline(fresh_search(), queries[first:last], RunSettings(),
                                 lambda pairs: [result for _, result in pairs],
                                 GivenBatch(first, number=number), pool).texts())

        parts = [(0, 0, 4), (1, 4, len(queries))]
        with ThreadPoolExecutor(2) as runs:
            found = list(runs.map(lambda part: run(*part), parts))
        for (_, first, last), results in zip(parts, found):
            expected, _ = search_batch(fresh_search(), queries[first:last], first)
            assert _hits_of(results) == _hits_of(expected)
        assert pool.submit((0,), lambda: 7).result(timeout=5) == 7
    finally:
        pool.close()
        db.close()


def test_a_given_batch_is_planned_and_then_waits_for_the_count_before(case, monkeypatch):
    """A given batch with the count of a batch before it (searched beside it on a cluster
    worker) is planned at once, and its jobs wait for that count, as the pipeline's own
    next batch waits for this one's."""
    from concurrent.futures import Future

    from gblastn.db.reader import open_db
    from gblastn.drivers import Search, pipeline
    from gblastn.drivers.run import RunSettings
    from gblastn.query import read_queries
    from gblastn.timing import StageTimes

    events, planned = [], threading.Event()
    real_plan, real_post = pipeline.Pipeline._plan, pipeline.Pipeline._post
    monkeypatch.setattr(pipeline.Pipeline, "_plan", lambda self, items: (
        real_plan(self, items), planned.set())[0])
    monkeypatch.setattr(pipeline.Pipeline, "_post", lambda self, *args: (
        events.append("posted"), real_post(self, *args))[1])
    before = Future()
    given = pipeline.GivenBatch(0, after=before)
    db = open_db(case["db"])
    try:
        run = pipeline.Pipeline(Search(db, make_options("megablast"), StageTimes(),
                                       CpuBackend()), read_queries(case["query"])[:3],
                                RunSettings(), lambda pairs: [r for _, r in pairs], given)
        results = []
        reading = threading.Thread(target=lambda: results.extend(run.texts()), daemon=True)
        reading.start()
        assert planned.wait(10)
        time.sleep(0.3)
        assert events == [] and not given.extensions.done()
        events.append("told")
        before.set_result(7)
        reading.join(10)
        assert events == ["told", "posted"] and len(results) == 3
        assert given.extensions.done()
    finally:
        db.close()


def test_a_cancelled_run_stops_every_stage_and_says_so(case):
    """Pipeline.cancel, from another thread (a cluster search dropped the batch): texts()
    raises CancelledError, and the stages stop, though the queries never end."""
    from concurrent.futures import CancelledError

    from gblastn.db.reader import open_db
    from gblastn.drivers import Search
    from gblastn.drivers.pipeline import Pipeline
    from gblastn.drivers.run import RunSettings
    from gblastn.query import read_queries
    from gblastn.timing import StageTimes

    first = read_queries(case["query"])[0]
    read, never = threading.Event(), threading.Event()

    def queries():
        yield first
        read.set()
        never.wait(10)

    db = open_db(case["db"])
    try:
        run = Pipeline(Search(db, make_options("megablast"), StageTimes(), CpuBackend()),
                       queries(), RunSettings(), lambda pairs: [])
        threading.Thread(target=lambda: (read.wait(10), run.cancel()), daemon=True).start()
        started = time.monotonic()
        with pytest.raises(CancelledError):
            list(run.texts())
        assert time.monotonic() - started < 5
    finally:
        never.set()
        db.close()


def test_the_count_is_told_before_the_slices_hits_are_joined(case, monkeypatch):
    """The next batch is planned from this batch's count of initial hits, which is known
    once the last slice is extended: it is told before the slices' hits are joined."""
    from gblastn import engine
    from gblastn.drivers import pipeline

    events = []
    real_count, real_join = pipeline._ExtensionCounts.count, engine.joined_volume_hits
    monkeypatch.setattr(pipeline._ExtensionCounts, "count", lambda self, batch, extensions:
                        events.append("counted") or real_count(self, batch, extensions))
    monkeypatch.setattr(engine, "joined_volume_hits", lambda parts: events.append(
        "joined" if len(parts) > 1 else "one slice") or real_join(parts))
    monkeypatch.setattr(engine, "FIRST_SLICE_LETTERS", 1)
    monkeypatch.setattr(engine, "SLICE_SEEDS", 200)
    assert search(case, "pipeline", 1, "told-early.out", DpAheadScans(), task="blastn") == \
        search(case, "serial", 1, "told-early-ref.out", task="blastn")
    joins = [k for k, event in enumerate(events) if event == "joined"]
    assert joins and all(events[k - 1] == "counted" for k in joins)


def test_masks_found_by_the_reader_give_identical_output(case, monkeypatch):
    """The reader finds the queries' masks a query at a time here, the planner takes those
    found and finds the rest: the output is the serial driver's."""
    from gblastn import query
    from gblastn.drivers import pipeline

    monkeypatch.setattr(pipeline, "MASK_AHEAD_LETTERS", 1)
    monkeypatch.setattr(pipeline, "QUERIES_AHEAD", 1)  # the reader waits, and masks ahead
    taken = []
    real = query._masks_of
    monkeypatch.setattr(query, "_masks_of", lambda queries, options, pool, found: taken.append(
        found is not None and any(mask is not None for mask in found)) or
        real(queries, options, pool, found))
    reference = search(case, "serial", 1, "masks-serial.out", task="blastn")
    for threads in (1, 4):
        taken.clear()
        assert search(case, "pipeline", threads, f"masks-ahead{threads}.out",
                      task="blastn") == reference
        assert any(taken)  # the batches after the first find their masks found


def test_the_planner_takes_the_masks_the_reader_kept():
    """Masks found for queries already planned are not kept (nothing would take them)."""
    from gblastn.drivers.pipeline import Pipeline

    reader = Pipeline.__new__(Pipeline)
    reader.masks_ahead, reader.planned_through = {}, -1
    reader.masks_lock = threading.Lock()
    reader.options = make_options("blastn")
    queries = [(k, Query(f"q{k}", "", np.full(60, 3, dtype=np.uint8), np.zeros(60, bool)))
               for k in range(4)]
    assert reader._masks_found(queries[:2]) == [None, None]
    unmasked = collections.deque(queries)
    assert reader._mask_ahead(unmasked) and not unmasked
    assert sorted(reader.masks_ahead) == [2, 3]
    assert not reader._mask_ahead(unmasked)
    found = reader._masks_found(queries[2:])
    assert all(mask.tolist() == [[0, 60]] for mask in found) and not reader.masks_ahead


def _bare_reader(count: int):
    """A Pipeline with only what its reader uses, reading `count` queries of 60 letters."""
    import queue

    from gblastn.drivers.pipeline import Pipeline

    reader = Pipeline.__new__(Pipeline)
    reader.masks_ahead, reader.planned_through = {}, -1
    reader.masks_lock, reader.stop = threading.Lock(), threading.Event()
    reader.read_order, reader.query_q = collections.deque(), queue.Queue(maxsize=100)
    reader.given = None
    reader.options = make_options("blastn")
    reader.queries = [Query(f"q{k}", "", np.full(60, 3, dtype=np.uint8), np.zeros(60, bool))
                      for k in range(count)]
    return reader


def test_the_reader_hands_every_query_on_before_it_masks_any(monkeypatch):
    """While the planner takes them, the queries are handed on as they are read: their
    masks are found ahead only after the last one (or while the queue is full), and not
    for queries planned by then."""
    from gblastn import query as query_module
    from gblastn.drivers.pipeline import _END

    reader = _bare_reader(6)
    queued_at_masking = []
    real = query_module.query_masks
    monkeypatch.setattr(query_module, "query_masks", lambda queries, options: (
        queued_at_masking.append(reader.query_q.qsize()), real(queries, options))[1])
    reader._masks_found([(0, reader.queries[0]), (1, reader.queries[1])])  # planned already
    reader._reader()
    assert queued_at_masking and queued_at_masking[0] == 6 + 1  # every query, then the end
    assert sorted(reader.masks_ahead) == [2, 3, 4, 5]
    handed = [reader.query_q.get_nowait() for _ in range(7)]
    assert [number for number, _ in handed[:6]] == list(range(6)) and handed[6] is _END


def test_a_stopped_run_finds_no_more_masks_ahead(monkeypatch):
    """After the last query the reader masks ahead chunk by chunk, and stops with the run."""
    from gblastn import query as query_module
    from gblastn.drivers import pipeline

    monkeypatch.setattr(pipeline, "MASK_AHEAD_LETTERS", 1)  # a query a chunk
    reader = _bare_reader(4)
    real = query_module.query_masks
    monkeypatch.setattr(query_module, "query_masks", lambda queries, options: (
        reader.stop.set(), real(queries, options))[1])
    reader._reader()
    assert sorted(reader.masks_ahead) == [0]


def test_failing_stage_stops_the_run_and_leaves_no_output(case, monkeypatch):
    from gblastn import engine
    from gblastn.options import make_options
    from gblastn.drivers.run import OutputSpec, RunSettings, run_search

    def broken(*args, **kwargs):
        raise RuntimeError("injected traceback fault")

    monkeypatch.setattr(engine.Engine, "trace_group", broken)
    out = case["folder"] / "broken.out"
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="injected traceback fault"):
        run_search([case["query"]], case["db"], make_options("megablast", num_threads=4),
                   OutputSpec("6", str(out), None, "db"), settings=RunSettings("pipeline"))
    assert time.monotonic() - started < 30
    assert not out.exists()
    assert not [p for p in os.listdir(case["folder"]) if p.startswith(".gblastn-")]


def test_sigint_stops_promptly_without_partial_output(tmp_path):
    from gblastn.db.writer import make_db

    rng = np.random.default_rng(3)
    genome = random_dna(rng, 400_000)
    db = make_db([write_fasta(tmp_path / "db.fa", [("g", genome)])], str(tmp_path / "db"),
                 progress=False)
    queries = [(f"q{i}", mutate(rng, genome[s:s + 3000], 0.05, 0.01))
               for i, s in enumerate(rng.integers(0, 390_000, 1000))]
    write_fasta(tmp_path / "q.fa", queries)
    # a list naming the same file many times: a long search from small inputs
    (tmp_path / "queries.list").write_text("q.fa\n" * 100)
    out = tmp_path / "out.tsv"
    # -X faulthandler: on a hang, SIGABRT makes the child print every thread's stack
    proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "gblastn", "search",
                             "-db", db, "-query_list",
                             str(tmp_path / "queries.list"), "-out", str(out), "-num_threads", "2",
                             "-device", "cpu"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_by_default)
    time.sleep(4)
    assert proc.poll() is None, "the search ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, stderr = proc.communicate(timeout=30)
        pytest.fail(f"gblastn did not stop after SIGINT; its threads:\n{stderr[-20000:]}")
    assert proc.returncode != 0
    assert "Traceback" not in stderr
    assert not out.exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".gblastn-")]


@pytest.mark.parametrize("task", ["megablast", "blastn", "blastn-short"])
def test_warm_up_reaches_every_stage_untimed(task):
    """The made-up search a search starts in the background runs every stage (through
    traceback, so each stage's compiled code is loaded) and adds nothing to the search's
    stage times: it counts its own, and no StageTimes is shared through the process."""
    from gblastn import timing
    from gblastn.engine import warm_up
    from gblastn.options import make_options

    searchs = timing.StageTimes()
    before = dict(searchs.seconds)
    assert warm_up(make_options(task)) >= 1
    assert searchs.seconds == before
    assert not [name for name, value in vars(timing).items()
                if isinstance(value, timing.StageTimes)]


BESIDE_THE_DEVICE = """
import sys
from concurrent.futures import Future
from gblastn import gapped
from gblastn.db import reader
from gblastn.engine import warm_up
from gblastn.options import make_options
from gblastn.scan import cpu

from gblastn.scan.backend import Backend, Capabilities

class Device(Backend):  # what the warm-up asks of the GPU's backend: extensions ahead
    capabilities = Capabilities(greedy_ahead=True, dp_ahead=True)

backend = Future()
backend.set_result(Device())
traced = warm_up(make_options(sys.argv[1]), 3_000_000, backend)
functions = {**vars(gapped), **vars(cpu), **vars(reader)}
print(traced, *(len(functions[name].signatures) for name in sys.argv[2:]))
"""


@pytest.mark.parametrize("task, loaded, left_out", [
    ("megablast", ["extend_chunks_given", "_extend_hits_given", "fill_ranges"],
     ["_extend_hits_begin", "scan_chunks"]),
    ("blastn", ["extend_chunks_dp_given", "_extend_hits_dp", "fill_ranges"], ["scan_chunks"])])
def test_warm_up_beside_the_device_loads_the_device_paths_stages(task, loaded, left_out):
    """Beside the GPU, the warm-up's made-up search takes the stages the search will take
    (the gapped stage given the GPU's extensions, in runs and in pieces; the reports' subject
    letters), and leaves out the CPU's scan and extensions, which the search will not call:
    in a fresh process, so that nothing else loaded them."""
    done = subprocess.run([sys.executable, "-c", BESIDE_THE_DEVICE, task, *loaded, *left_out],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    traced, *signatures = map(int, done.stdout.split())
    assert traced >= 1
    assert signatures == [1] * len(loaded) + [0] * len(left_out)


def test_searches_collect_garbage_rarely_and_restore_the_thresholds():
    """While any search of the process runs, the collector's thresholds are raised (none
    lowered: a user's higher ones stand); the last search to end restores them."""
    import gc

    from gblastn.pools import SEARCH_GC_THRESHOLDS, rare_collections

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 500)
        with rare_collections():
            assert gc.get_threshold() == (SEARCH_GC_THRESHOLDS[0], SEARCH_GC_THRESHOLDS[1],
                                          max(500, SEARCH_GC_THRESHOLDS[2]))
            with rare_collections():
                pass
            assert gc.get_threshold()[0] == SEARCH_GC_THRESHOLDS[0]  # one search still runs
        assert gc.get_threshold() == (700, 10, 500)
    finally:
        gc.set_threshold(*before)


def test_a_search_runs_with_rare_collections(case, monkeypatch):
    """run_search (the command line's and the API's searches) raises the thresholds for its
    whole run, and restores them after."""
    import gc

    from gblastn.drivers import run as run_module
    from gblastn.pools import SEARCH_GC_THRESHOLDS

    seen = []
    real = run_module._search_with
    monkeypatch.setattr(run_module, "_search_with",
                        lambda *args: seen.append(gc.get_threshold()) or real(*args))
    before = gc.get_threshold()
    assert search(case, "pipeline", 2, "rare_collections.tsv") == \
        search(case, "serial", 1, "rare_collections_serial.tsv")
    assert seen and seen[0][0] >= SEARCH_GC_THRESHOLDS[0] and gc.get_threshold() == before
