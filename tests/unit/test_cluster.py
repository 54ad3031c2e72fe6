"""The search on a Dask cluster of CPU worker processes gives the single-process search's
output byte for byte: for 1, 2 and 3 shards, any assignment of the subjects to shards (ties
between identical subjects held by different shards included), max_target_seqs and max_hsps
cuts, megablast and blastn, tabular and pairwise output, the database replicated with
blastn's batches dealt in turn, a search sent through gblastn serve's door; a worker lost
mid-search has its shard or its batch rerun elsewhere, and a search that cannot finish
leaves no output."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from golden import megablast_case  # noqa: E402
from reliability import sigint_by_default  # noqa: E402

from gblastn.db.writer import make_db  # noqa: E402
from gblastn.drivers.cluster import ClusterSpec  # noqa: E402
from gblastn.drivers.run import OutputSpec, RunSettings, run_search  # noqa: E402
from gblastn.errors import ClusterError, OptionsError  # noqa: E402
from gblastn.options import make_options  # noqa: E402

TABULAR = "6 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue " \
    "bitscore score"
DUPLICATES = [6, 7, 8]  # dupA, dupB, dupC: identical subjects, tied hits of query qs9


@pytest.fixture(scope="module")
def cluster():
    """Two CPU worker processes of one thread, for the whole module."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=40) as local:
        yield local


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cluster")
    db_fasta, queries = megablast_case(str(folder))
    # blastn's batches: the first of 5,000 letters (two small queries), then the rest
    small, big = (open(queries[name]).read() for name in ("small", "big"))
    queries["mixed"] = str(folder / "q_mixed.fa")
    with open(queries["mixed"], "w") as mixed:
        mixed.write(small + big + small + big + small)
    return {"db": str(make_db([db_fasta], str(folder / "gdb"), progress=False)),
            "queries": queries, "folder": folder}


@pytest.fixture(scope="module")
def small_tabular(case) -> bytes:
    """The single search's tabular output of the small queries, max_target_seqs 2 (made
    before any test's failed search, which leaves the database open in this process)."""
    return search(case, "small", TABULAR, max_target_seqs=2)


def search(case, query, outfmt, task="megablast", spec=None, **extra) -> bytes:
    out = case["folder"] / "out.txt"
    run_search([case["queries"][query]], case["db"], make_options(task, **extra),
               OutputSpec(outfmt, str(out), None, "db"), settings=RunSettings(cluster=spec))
    return out.read_bytes()


def on(cluster, **spec) -> ClusterSpec:
    return ClusterSpec(scheduler=cluster.scheduler_address, device="cpu", **spec)


SEARCHES = {  # (query, outfmt, task, options)
    "megablast tabular, max_target_seqs cut among ties": ("small", TABULAR, "megablast",
                                                          {"max_target_seqs": 2}),
    "megablast pairwise": ("small", "0", "megablast", {"max_target_seqs": 5}),
    "megablast long query": ("big", TABULAR, "megablast", {}),
    "blastn tabular, max_hsps": ("small", TABULAR, "blastn", {"max_hsps": 1,
                                                              "max_target_seqs": 3}),
}


@pytest.mark.parametrize("shards", [1, 2, 3])
@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_shards_give_the_single_search(cluster, case, name, shards):
    if shards == 1 and name != "megablast tabular, max_target_seqs cut among ties":
        pytest.skip("one shard: one case is enough")
    query, outfmt, task, extra = SEARCHES[name]
    expected = search(case, query, outfmt, task, **extra)
    assert expected.strip()
    got = search(case, query, outfmt, task, on(cluster, shards=shards, mode="shard"),
                 **extra)
    assert got == expected


def test_replicated_database_gives_the_single_search(cluster, case, small_tabular):
    expected = small_tabular
    assert search(case, "small", TABULAR, spec=on(cluster, mode="replicate"),
                  max_target_seqs=2) == expected


@pytest.mark.parametrize("outfmt", [TABULAR, "5"])
def test_replicated_batches_dealt_in_turn_give_the_single_search(cluster, case, outfmt):
    """blastn's batches on two workers in turn, each sized from the one before: the first on
    one worker, the second on the other (the XML report's head goes with query 0)."""
    expected = search(case, "mixed", outfmt, "blastn")
    assert search(case, "mixed", outfmt, "blastn", on(cluster, mode="replicate")) == expected


@pytest.mark.parametrize("mode", ["replicate", "shard"])
def test_each_batch_is_sized_from_the_extensions_the_one_before_kept(cluster, case,
                                                                     monkeypatch, mode):
    """With a target of 3,000 extensions a batch (blastn's is 1,000,000 at least), the mixed
    set makes five batches, each sized from the last: the cluster counts each batch's
    extensions as one process does (summed over the shards), so it forms the same batches
    and gives the same output."""
    from gblastn import engine

    monkeypatch.setattr(engine, "MIN_TARGET_EXTENSIONS", 3000)
    counted = []
    searched = engine.QueryBatchSizes.searched
    monkeypatch.setattr(engine.QueryBatchSizes, "searched",
                        lambda sizes, extensions: (counted.append(extensions),
                                                   searched(sizes, extensions)))
    expected = search(case, "mixed", TABULAR, "blastn")
    in_one_process, counted[:] = list(counted), []
    assert search(case, "mixed", TABULAR, "blastn", on(cluster, mode=mode)) == expected
    assert counted == in_one_process and len(counted) == 5


@pytest.mark.parametrize("mode", ["replicate", "shard"])
@pytest.mark.parametrize("workers", [2, 1])
@pytest.mark.parametrize("largest, dropped", [(6_000, "0"), (None, "[1-9][0-9]*")])
def test_batches_formed_ahead_give_the_single_search(cluster, case, monkeypatch, largest,
                                                     dropped, workers, mode):
    """Batches of at most 5,000 letters keep their size: the workers search the forecast
    ones at once (replicate mode; one worker plans each beside the batch before, its jobs
    waiting for that one's count) or each over its shard, planned beside the batch before
    and searched after it (shard mode), and none is dropped. With a target of 3,000
    extensions each batch's size changes, the forecasts are dropped and formed again, and
    the output stays the same."""
    import contextlib

    from gblastn import engine
    from gblastn.timing import StageTimes

    monkeypatch.setattr(engine, "MIN_TARGET_EXTENSIONS", 3000)
    if largest is not None:
        monkeypatch.setitem(engine.QUERY_CHUNK_LETTERS, "blastn", largest)
    expected = search(case, "mixed", TABULAR, "blastn")
    times = StageTimes()
    out = case["folder"] / "forecast.txt"
    workers_cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                          dashboard_address=":0", silence_logs=40) \
        if workers == 1 else contextlib.nullcontext(cluster)
    with workers_cluster as where:
        run_search([case["queries"]["mixed"]], case["db"], make_options("blastn"),
                   OutputSpec(TABULAR, str(out), None, "db"),
                   settings=RunSettings(cluster=on(where, mode=mode)), times=times)
    assert out.read_bytes() == expected
    formed, forecasts = re.fullmatch(r"(\d+) formed, (\d+) forecasts dropped",
                                     times.notes["batches"]).groups()
    assert re.fullmatch(dropped, forecasts) and int(formed) > 3


def test_a_shards_preliminary_searches_take_turns_on_a_worker():
    """A batch's search over a shard waits for the one begun on the worker before it (its
    query setup, made before the turn, runs beside that one); an earlier batch begun after
    a later one (run again) waits for none, and a forgotten search leaves no turn behind."""
    import threading

    from gblastn.drivers.resident import ResidentDatabase

    resident = object.__new__(ResidentDatabase)  # the turns alone, without a worker
    resident.lock, resident.last_turn = threading.Lock(), {}
    resident.pending, resident.last_run, resident.dropped = {}, {}, set()
    order = []
    first = resident.prelim_turn("s", 0)
    first.__enter__()
    searched = threading.Thread(target=lambda: [order.append(1)
                                                for _ in [resident.prelim_turn("s", 1)
                                                          .__enter__()]])
    searched.start()
    searched.join(0.2)
    assert searched.is_alive() and order == []
    with resident.prelim_turn("s", 0):  # begun after batch 1: its turn is not behind it
        order.append(0)
    order.append("first done")
    first.__exit__(None, None, None)
    searched.join(5)
    assert order == [0, "first done", 1]
    resident.forget("s")
    assert resident.last_turn == {}


def test_batches_go_to_the_worker_dealt_the_least_work():
    """Batches whose sizes alternate (blastn's largest and smallest, where queries find next
    to nothing) are spread by their work: dealt in turn, every large one went to the same
    worker."""
    from gblastn.drivers.cluster import BATCH_PASS_LETTERS, ClusterSearch

    search = object.__new__(ClusterSearch)  # the dealing alone, without a cluster
    search.workers, search.dealt = ["tcp://a:1", "tcp://b:1"], {}
    first, small, large = ["a" * 10_000], ["c" * 100], ["b" * 5_000_000]
    dealt = [search._deal(batch)[0]
             for batch in (first, small, large, small, large, small, large)]
    assert dealt == [0, 1, 1, 0, 0, 1, 1]
    assert search.dealt == {"tcp://a:1": 3 * BATCH_PASS_LETTERS + 5_010_100,
                            "tcp://b:1": 4 * BATCH_PASS_LETTERS + 10_000_200}


def test_the_last_batch_is_shared_where_that_ends_the_dealing_lowest():
    """Whole batches leave one worker a batch behind the others at the end: the last one
    goes to the k least dealt workers, each over 1/k of the database, for the k that ends
    their dealing lowest; where the workers stand level without it, or where the batch is
    small beside its pass over the database, it stays whole."""
    from types import SimpleNamespace

    from gblastn.drivers.cluster import ClusterSearch

    search = object.__new__(ClusterSearch)
    search.db, search.split_last, search.last_split = SimpleNamespace(num_seqs=50), True, 1
    search.workers, search.dealt = ["tcp://a:1", "tcp://b:1"], {}
    large = ["b" * 5_000_000]
    assert [search._deal(large) for _ in range(6)] == [[0], [1], [0], [1], [0], [1]]
    assert search._deal(large, last=True) == [0, 1] and search.last_split == 2
    assert search.dealt["tcp://a:1"] == search.dealt["tcp://b:1"]

    search.dealt = {}
    assert search._deal(["a" * 13_333]) == [0]
    assert search._deal(["a" * 37_000], last=True) == [1]  # its pass is most of its work

    search.workers, search.dealt = [f"tcp://{name}:1" for name in "abcd"], {}
    assert [search._deal(large)[0] for _ in range(6)] == [0, 1, 2, 3, 0, 1]
    assert search._deal(large, last=True) == [2, 3]  # 2 and 3 a batch behind
    search.dealt = {}
    assert [search._deal(large)[0] for _ in range(7)] == [0, 1, 2, 3, 0, 1, 2]
    assert search._deal(large, last=True) == [3]  # 3 alone a batch behind: whole there
    search.dealt = {}
    assert search._deal(["a" * 1_000_000]) == [0]
    assert search._deal(large, last=True) == [1, 2, 3]


def test_a_filtered_search_keeps_its_last_batch_whole():
    from types import SimpleNamespace

    from gblastn.drivers.cluster import ClusterSearch

    search = object.__new__(ClusterSearch)
    search.db, search.split_last, search.last_split = SimpleNamespace(num_seqs=50), False, 1
    search.workers, search.dealt = ["tcp://a:1", "tcp://b:1"], {}
    assert search._deal(["b" * 5_000_000], last=True) == [0]


def test_a_replicated_search_guesses_its_second_batch(cluster, case,
                                                                     monkeypatch, small_tabular):
    from gblastn import engine

    guesses = []

    class Recorded(engine.ForecastBatches):
        def __init__(self, *args, **kwargs):
            guesses.append(kwargs.get("guess_second"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(engine, "ForecastBatches", Recorded)
    assert search(case, "small", TABULAR, spec=on(cluster, mode="replicate"),
                  max_target_seqs=2) == small_tabular
    assert guesses == [True]


def test_a_dropped_forecasts_letters_stay_dealt_to_its_worker():
    """A dropped forecast's preliminary search may still be running on its worker (a
    running task is not stopped): the next batch goes to another worker first."""
    from types import SimpleNamespace

    from gblastn.drivers.cluster import ClusterSearch

    search = object.__new__(ClusterSearch)
    search.workers, search.dealt, search.forecasts_dropped = ["tcp://a:1", "tcp://b:1"], {}, 0
    search.search_id = "s"
    search.client = SimpleNamespace(cancel=lambda futures: None, run=lambda *args: None)
    first, guess, true_second = ["a" * 10], ["b" * 50] * 2, ["b" * 50]
    assert search._deal(first) == [0]
    assert search._deal(guess) == [1]
    search._drop([(SimpleNamespace(queries=guess, number=1), [None], [], None)])
    assert search.forecasts_dropped == 1
    assert search._deal(true_second) == [0]


def test_a_cancelled_forecasts_preliminary_search_is_not_kept(case):
    """A forecast batch cancelled while its task ran, or after, leaves nothing on its
    worker for a traceback that will not come; the search's end forgets the rest."""
    from types import SimpleNamespace

    from gblastn.db.reader import open_db
    from gblastn.drivers.resident import (PLUGIN_NAME, ResidentDatabase, ResidentDatabases,
                                          drop_forecasts, forget_search)

    plugin = ResidentDatabases("cpu")
    plugin.setup()
    resident = plugin.databases["db"] = ResidentDatabase(open_db(case["db"]), plugin)
    worker = SimpleNamespace(plugins={PLUGIN_NAME: plugin})
    try:
        resident.keep(("s", 3, None), "kept before the cancel")
        resident.keep(("s", 5, None), "a batch that stands")
        drop_forecasts("s", [(3, None), (4, None)], dask_worker=worker)  # 4 still running
        resident.keep(("s", 4, None), "its task ended after the cancel")
        assert resident.pending == {("s", 5, None): "a batch that stands"}
        assert not resident.dropped
        drop_forecasts("s", [(6, None), (7, 0), (7, 1)], dask_worker=worker)
        forget_search("s", dask_worker=worker)
        assert not resident.pending and not resident.dropped
    finally:
        resident.db.close()


def test_a_dropped_or_forgotten_batchs_run_is_stopped(case):
    """A whole batch's run goes on after its count: a forecast the search cancels, or a
    search that ends without collecting it (it failed), stops it."""
    from types import SimpleNamespace

    from gblastn.db.reader import open_db
    from gblastn.drivers.resident import (PLUGIN_NAME, ReplicatedRun, ResidentDatabase,
                                          ResidentDatabases, drop_forecasts, forget_search)

    plugin = ResidentDatabases("cpu")
    plugin.setup()
    resident = plugin.databases["db"] = ResidentDatabase(open_db(case["db"]), plugin)
    worker = SimpleNamespace(plugins={PLUGIN_NAME: plugin})
    stopped = []

    def running(name):
        run = ReplicatedRun.__new__(ReplicatedRun)
        run.pipeline = SimpleNamespace(cancel=lambda: stopped.append(name))
        return run

    try:
        assert resident.keep(("s", 3, None), running("forecast"))
        assert resident.keep(("s", 4, None), running("left"))
        drop_forecasts("s", [(3, None), (5, None)], dask_worker=worker)
        assert stopped == ["forecast"]
        assert not resident.keep(("s", 5, None), running("began after the cancel"))
        forget_search("s", dask_worker=worker)
        assert stopped == ["forecast", "left"] and not resident.pending
    finally:
        resident.db.close()


def test_serving_waits_for_the_workers_preload():
    """gblastn serve announces itself once each worker holds the database and its stages'
    code (its preload thread ended), or once the wait runs out."""
    import asyncio
    import threading
    from types import SimpleNamespace

    from gblastn.drivers.resident import PLUGIN_NAME, preloaded

    def worker_loading(seconds):
        loading = threading.Thread(target=time.sleep, args=(seconds,))
        loading.start()
        return SimpleNamespace(plugins={PLUGIN_NAME: SimpleNamespace(loading=loading)})

    started = time.perf_counter()
    assert asyncio.run(preloaded(10, dask_worker=worker_loading(0.3)))
    assert time.perf_counter() - started >= 0.3
    assert not asyncio.run(preloaded(0.05, dask_worker=worker_loading(0.5)))
    no_preload = SimpleNamespace(plugins={PLUGIN_NAME: SimpleNamespace(loading=None)})
    assert asyncio.run(preloaded(10, dask_worker=no_preload))


def test_serving_says_which_workers_are_still_loading():
    """A preload that outlasts the wait is announced: searches are served, and wait for it."""
    from gblastn.drivers.serve import PRELOAD_SECONDS, still_loading

    assert still_loading({"tcp://a": True, "tcp://b": True}) == ""
    assert still_loading({}) == ""
    assert still_loading({"tcp://a": True, "tcp://b": False}) == (
        f"; 1 worker still loading the database after {PRELOAD_SECONDS} s "
        "(searches wait for it)")
    assert still_loading({"tcp://a": False, "tcp://b": False}).startswith(
        "; 2 workers still loading")


class FinishingFuture:
    """A Future whose wait runs out just as its task ends (its result then being gathered),
    or whose task raised `error`."""

    def __init__(self, error=None):
        self.error, self.waits = error, 0
        self.status = "finished" if error is None else "error"

    def result(self, timeout=None):
        self.waits += 1
        if self.error is not None:
            raise self.error
        if self.waits == 1:
            raise TimeoutError(f"timed out after {timeout} s.")
        return 7

    def done(self):
        return True

    def exception(self):
        return self.error


def waiting_search():
    from types import SimpleNamespace

    from gblastn.drivers.cluster import ClusterSearch

    search = object.__new__(ClusterSearch)  # the wait alone, without a cluster
    search.search_id = "s"
    search.client = SimpleNamespace(run_on_scheduler=lambda *args: pytest.fail("not stranded"))
    return search


def test_a_wait_that_runs_out_as_its_task_ends_takes_the_result():
    future = FinishingFuture()
    assert waiting_search()._results([future]) == [7]
    assert future.waits == 2


def test_a_tasks_own_timeout_error_ends_the_wait():
    with pytest.raises(TimeoutError, match="the task's own"):
        waiting_search()._results([FinishingFuture(TimeoutError("the task's own"))])


def task_state(key, dask_scheduler=None) -> str | None:
    task = dask_scheduler.tasks.get(key)
    return None if task is None else task.state


def test_a_task_placed_on_a_worker_gone_before_any_ran_is_sent_on():
    """Placed on a worker that no longer exists while none runs, a task stays unrunnable when
    a worker joins, allow_other_workers or not; schedule_stranded sends a search's such
    tasks on, to the worker there is."""
    from gblastn.drivers.cluster import schedule_stranded

    with distributed.LocalCluster(n_workers=0, threads_per_worker=1, processes=False,
                                  dashboard_address=":0", silence_logs=40) as empty, \
            distributed.Client(empty, set_as_default=False) as client:
        future = client.submit(int, "7", key="gblastn-request-s1-0-0",
                               workers=["tcp://127.0.0.1:9"], allow_other_workers=True)
        deadline = time.monotonic() + 30
        while client.run_on_scheduler(task_state, future.key) != "no-worker":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        empty.scale(1)
        client.wait_for_workers(1, timeout=60)
        with pytest.raises(TimeoutError):
            future.result(timeout=1)
        assert client.run_on_scheduler(schedule_stranded, "another-search") == 0
        assert client.run_on_scheduler(schedule_stranded, "s1") == 1
        assert future.result(timeout=30) == 7


def test_sam_is_formatted_where_its_footer_is_written(cluster, case):
    expected = search(case, "small", "17", max_target_seqs=2)
    assert search(case, "small", "17", spec=on(cluster, shards=2), max_target_seqs=2) == \
        expected


def test_any_assignment_gives_the_single_search(cluster, case):
    """Random assignments of the subjects to three shards (the tied duplicates each in
    another one first), through the Python API."""
    import gblastn

    def rows(results):
        return [(r.id, hit.id, hsp.score, hsp.evalue) for r in results for hit in r.hits
                for hsp in hit.hsps]

    query = case["queries"]["small"]
    expected = rows(gblastn.search(query, case["db"], task="megablast", max_target_seqs=2))
    rng = np.random.default_rng(5)
    assignments = [np.arange(10) % 3]
    assignments[0][DUPLICATES] = [2, 0, 1]
    assignments += [rng.integers(0, 3, 10) for _ in range(2)]
    for assignment in assignments:
        got = gblastn.search(query, case["db"], task="megablast", max_target_seqs=2,
                             scheduler=cluster.scheduler_address, shard_assignment=assignment)
        assert rows(got) == expected, assignment


def test_stage_times_name_the_split_and_each_workers_share(cluster, case):
    from gblastn.timing import StageTimes

    times = StageTimes()
    run_search([case["queries"]["small"]], case["db"], make_options("megablast"),
               OutputSpec(TABULAR, str(case["folder"] / "split.txt"), None, "db"),
               settings=RunSettings(cluster=on(cluster, shards=2)), times=times)
    report = times.report()
    assert "cluster wait" in report
    split, workers = report.split("; cluster: ")[1].split("; workers: ")
    assert split == "2 workers, the database in 2 shards; batches: 2 formed, 0 forecasts " \
        "dropped"
    shares = workers.split(" / ")
    # which stages a worker shows depends on where the scheduler ran the tasks and on their
    # times (stages under 5 ms are left out): only the form is fixed
    assert len(shares) == 2 and all(re.fullmatch(r"tasks \d+\.\d\ds \(.*\)", share)
                                    for share in shares)


def test_cluster_flags_need_a_cluster(case):
    with pytest.raises(OptionsError, match="-shards and -cluster_mode need"):
        ClusterSpec(shards=2).check()
    with pytest.raises(OptionsError, match="one of -scheduler"):
        ClusterSpec(scheduler="tcp://x:1", local_workers=2).check()


def test_unreachable_scheduler_fails_in_one_line_without_output(case, tmp_path):
    out = tmp_path / "out.txt"
    done = subprocess.run([sys.executable, "-m", "gblastn", "search", "-db", case["db"],
                           "-query", case["queries"]["small"], "-out", str(out),
                           "-scheduler_file", str(tmp_path / "missing.json")],
                          capture_output=True, text=True)
    assert done.returncode == 6
    assert done.stderr.startswith("gblastn: error: -scheduler_file") and \
        done.stderr.count("\n") == 1
    assert not out.exists()


@pytest.fixture(scope="module")
def door_file(case, tmp_path_factory):
    """A scheduler file naming the door of a running gblastn serve (two CPU workers), and a
    Dask address where nothing listens: only a search sent through the door can finish."""
    import json

    folder = tmp_path_factory.mktemp("door")
    served_file = folder / "served.json"
    serve = subprocess.Popen([sys.executable, "-m", "gblastn", "serve", "-db", case["db"],
                              "-workers", "2", "-device", "cpu", "-scheduler_file",
                              str(served_file)], stderr=subprocess.PIPE, text=True)
    try:
        assert any("serving" in line for line in iter(serve.stderr.readline, "")), \
            "serve did not start"
        info = json.loads(served_file.read_text())
        info["address"] = "tcp://127.0.0.1:1"
        door_file = folder / "door.json"
        door_file.write_text(json.dumps(info))
        yield str(door_file)
    finally:
        serve.terminate()
        serve.wait(timeout=60)


def through(door_file: str, **spec) -> ClusterSpec:
    return ClusterSpec(scheduler_file=door_file, device="cpu", **spec)


def refused_through_the_door(door_file, case, query, error, match) -> None:
    """The served search of the file `query` raises `error` (matching `match`), and leaves
    nothing beside the file."""
    out = query.parent / "out.txt"
    with pytest.raises(error, match=match):
        run_search([str(query)], case["db"], make_options("megablast"),
                   OutputSpec(TABULAR, str(out), None, "db"),
                   settings=RunSettings(cluster=through(door_file)))
    assert sorted(os.listdir(query.parent)) == [query.name]


@pytest.mark.parametrize("query, outfmt, task, extra", [
    ("small", TABULAR, "megablast", {"max_target_seqs": 2}),
    ("small", "17", "megablast", {"max_target_seqs": 2}),  # SAM, formatted here
    ("mixed", "5", "blastn", {}),                           # several batches
])
def test_search_through_serves_door_gives_the_single_search(door_file, case, query, outfmt,
                                                            task, extra):
    expected = search(case, query, outfmt, task, **extra)
    assert search(case, query, outfmt, task, through(door_file), **extra) == expected


def test_queries_sent_through_the_door_in_small_chunks_give_the_single_search(
        door_file, case, monkeypatch):
    """The searching process sends the queries in chunks as it reads them (a query or two a
    chunk here): the served search forms blastn's batches from them as they come."""
    from gblastn.drivers import served

    monkeypatch.setattr(served, "FIRST_CHUNK_BYTES", 1000)
    monkeypatch.setattr(served, "CHUNK_BYTES", 2000)
    expected = search(case, "mixed", "5", "blastn")
    assert search(case, "mixed", "5", "blastn", through(door_file)) == expected


def test_a_query_file_broken_midway_stops_the_served_search(door_file, case, tmp_path,
                                                           monkeypatch, small_tabular):
    """A gzipped query file cut in half: its first chunks are sent and searched, then the
    reading error ends the search with that error, no output, and the door serves on."""
    import gzip

    from gblastn.drivers import served
    from gblastn.errors import InputError

    monkeypatch.setattr(served, "FIRST_CHUNK_BYTES", 1000)
    whole = gzip.compress(open(case["queries"]["mixed"], "rb").read())
    broken = tmp_path / "broken.fa.gz"
    broken.write_bytes(whole[:len(whole) // 2])
    refused_through_the_door(door_file, case, broken, InputError, "broken.fa.gz")
    assert search(case, "small", TABULAR, spec=through(door_file),
                  max_target_seqs=2) == small_tabular


@pytest.mark.parametrize("shares", [True, False])
def test_door_tells_the_split_and_each_workers_share_when_asked(door_file, case, shares):
    from gblastn.timing import StageTimes

    times = StageTimes()
    run_search([case["queries"]["small"]], case["db"], make_options("megablast"),
               OutputSpec(TABULAR, str(case["folder"] / "split.txt"), None, "db"),
               settings=RunSettings(cluster=through(door_file, worker_shares=shares)),
               times=times)
    assert times.notes["cluster"].startswith("2 workers")
    assert ("workers" in times.notes) == shares


def test_served_searchs_error_comes_back_as_raised_there(door_file, case, tmp_path,
                                                          small_tabular):
    """The served process refuses the search (culling needs the database whole): the
    searching process raises its error, with its class, and writes nothing. (small_tabular
    is made before this failed search.)"""
    out = tmp_path / "out.txt"
    with pytest.raises(OptionsError, match="-culling_limit and -best_hit_. see the whole "
                                           "database at once"):
        run_search([case["queries"]["small"]], case["db"],
                   make_options("megablast", culling_limit=1),
                   OutputSpec(TABULAR, str(out), None, "db"),
                   settings=RunSettings(cluster=through(door_file, shards=2)))
    assert not out.exists() and not list(tmp_path.iterdir())


# the searching process of a search sent through the door, with numpy's import made to fail
WITHOUT_NUMPY = ("import sys; sys.modules['numpy'] = None; sys.argv[0] = 'gblastn'; "
                 "from gblastn.__main__ import main; main()")


def cli_search(case, args, door_file=None, stdin=None, without_numpy=False):
    """(return code, stdout, stderr) of `gblastn search -db DB ARGS` in a process of its
    own, through the door when given."""
    command = [sys.executable, "-c", WITHOUT_NUMPY] if without_numpy else \
        [sys.executable, "-m", "gblastn"]
    extra = ["-scheduler_file", door_file] if door_file else []
    done = subprocess.run([*command, "search", "-db", case["db"], *args, *extra],
                          input=stdin, capture_output=True)
    return done.returncode, done.stdout, done.stderr


def without_command_line(output: bytes) -> bytes:
    """The output without SAM's @PG line, which names the command (-scheduler_file too)."""
    return b"".join(line for line in output.splitlines(keepends=True)
                    if not line.startswith(b"@PG"))


def reader_lines(stderr: bytes) -> list:
    """stderr without gblastn's own notes (a first search's compile notice)."""
    return [line for line in stderr.splitlines() if not line.startswith(b"gblastn:")]


@pytest.mark.parametrize("outfmt, without_numpy", [("7 std qlen", True), ("0", True),
                                                   ("17 SQ", False)])
def test_a_search_through_the_door_reads_and_formats_there(door_file, case, outfmt,
                                                          without_numpy):
    """The searching process parses its command line, sends the query file's bytes and
    writes what comes back: the served process reads the queries and makes every text,
    the report's last one (outfmt 7's count, the pairwise statistics, SAM's whole file)
    included. For the tabular and pairwise reports (XML's is made as the pairwise one is)
    the searching process imports no numpy."""
    args = ["-query", case["queries"]["mixed"], "-outfmt", outfmt, "-max_target_seqs", "3"]
    code, expected, warned = cli_search(case, args)
    assert code == 0 and expected
    code, out, served_warned = cli_search(case, args, door_file, without_numpy=without_numpy)
    assert (code, reader_lines(served_warned)) == (0, reader_lines(warned))
    assert without_command_line(out) == without_command_line(expected)


def test_a_file_per_query_through_the_door(door_file, case, tmp_path):
    """-outfmt 14: the served process makes each query's text, the searching process writes
    each beside -out and the list of them in -out."""
    written = {}
    for where, door in (("here", None), ("served", door_file)):
        folder = tmp_path / where
        folder.mkdir()
        args = ["-query", case["queries"]["small"], "-outfmt", "14",
                "-out", str(folder / "out.xml")]
        assert cli_search(case, args, door)[0] == 0
        written[where] = {path.name: path.read_bytes().replace(str(folder).encode(), b"")
                          for path in folder.iterdir()}
    assert len(written["here"]) > 2 and written["served"] == written["here"]


def test_queries_from_stdin_a_list_and_gzip_through_the_door(door_file, case, tmp_path):
    """Standard input (with -query_loc, which the served process applies), and a
    -query_list of a gzipped file and a plain one (the queries numbered across both), give
    the one-process search's output."""
    import gzip

    small = open(case["queries"]["small"], "rb").read()
    (tmp_path / "a.fa.gz").write_bytes(gzip.compress(small))
    (tmp_path / "b.fa").write_bytes(b"ACGTTGCAAGGCTTAACGGATCCAGTTACGGA\n" + small)
    (tmp_path / "list.txt").write_text("a.fa.gz\nb.fa\n")
    for args, stdin in ((["-outfmt", "6", "-query_loc", "30-1700"], small),
                        (["-query_list", str(tmp_path / "list.txt"), "-outfmt", "7"], None)):
        code, expected, _ = cli_search(case, args, stdin=stdin)
        assert code == 0 and expected
        code, out, _ = cli_search(case, args, door_file, stdin, without_numpy=True)
        assert (code, out) == (0, expected)


def test_the_readers_warnings_come_back_through_the_door(door_file, case, tmp_path):
    """A record without letters, a hyphen dropped, a title that ends like a sequence and a
    record of N alone (no statistics): blastn warns of each, and the served search's reader
    does so through the searching process's stderr."""
    odd = tmp_path / "odd.fa"
    odd.write_bytes(b">empty\n>hyphen\n" + b"ACGT-ACGTTGCA" * 8 + b"\n>title " +
                    b"ACGT" * 6 + b"\n>all_n\n" + b"N" * 80 + b"\n" +
                    open(case["queries"]["small"], "rb").read())
    args = ["-query", str(odd), "-outfmt", "6"]
    code, expected, warned = cli_search(case, args)
    assert code == 0 and len(reader_lines(warned)) >= 4
    assert b"Query_4 all_n: Could not calculate ungapped" in warned
    code, out, served_warned = cli_search(case, args, door_file)
    assert (code, out, reader_lines(served_warned)) == (0, expected, reader_lines(warned))


def test_a_malformed_query_through_the_door_fails_as_one_process_does(door_file, case,
                                                                     tmp_path):
    """The served process's reader refuses the file: the searching process fails with its
    error (and exit status), as a search in one process does, and writes nothing."""
    bad = tmp_path / "bad.fa"
    bad.write_bytes(b">q1\nACGTTGCA\n>q2\n" + b"@" * 30 + b"\n")
    out = tmp_path / "out.txt"
    args = ["-query", str(bad), "-out", str(out), "-outfmt", "6", "-device", "cpu"]
    code, _, error = cli_search(case, args)
    assert code == 2 and b"doesn't look like plausible data" in error and not out.exists()
    assert cli_search(case, args, door_file, without_numpy=True) == (code, b"", error)
    assert sorted(os.listdir(tmp_path)) == ["bad.fa"]


def test_a_malformed_query_early_in_a_large_file_comes_back_as_its_error(door_file, case,
                                                                        tmp_path):
    """The served process refuses the file's second record while the searching process is
    still sending megabytes of it: the error still reaches the search, whole, and the
    door serves on."""
    from gblastn.errors import InputError

    bad = tmp_path / "bad.fa"
    record = b">r\n" + b"ACGTTGCAAGGCTTAACGGATCCAGTTACGGA" * 2000 + b"\n"
    bad.write_bytes(b">q1\nACGTTGCA\n>q2\n" + b"@" * 30 + b"\n" + record * 150)
    refused_through_the_door(door_file, case, bad, InputError,
                             "doesn't look like plausible data")


def test_closed_door_fails_in_one_line_without_output(case, tmp_path):
    """A scheduler file that a killed gblastn serve left: its door is closed."""
    import json
    import socket

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    scheduler_file = tmp_path / "scheduler.json"
    scheduler_file.write_text(json.dumps({"address": "tcp://127.0.0.1:1",
                                          "gblastn-search": f"127.0.0.1:{port}"}))
    out = tmp_path / "out.txt"
    done = subprocess.run([sys.executable, "-m", "gblastn", "search", "-db", case["db"],
                           "-query", case["queries"]["small"], "-out", str(out),
                           "-scheduler_file", str(scheduler_file)],
                          capture_output=True, text=True)
    assert done.returncode == 6
    assert done.stderr.startswith("gblastn: error: cannot reach the served cluster's door") \
        and done.stderr.count("\n") == 1
    assert not out.exists()


class KillOnExecuting(distributed.WorkerPlugin):
    """Kills its worker's process when a task whose key starts with `prefix` starts: once
    in all (the marker file), or every time."""

    def __init__(self, prefix: str, marker: str | None):
        self.prefix, self.marker = prefix, marker

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or not str(key).startswith(self.prefix):
            return
        if self.marker is not None:
            if os.path.exists(self.marker):
                return
            open(self.marker, "w").close()
        os._exit(1)


@pytest.fixture
def killer(cluster):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    client = distributed.Client(cluster, set_as_default=False)

    def install(prefix, marker):
        client.register_plugin(KillOnExecuting(prefix, marker), name="kill")

    yield install
    for attempt in range(5):
        try:
            client.unregister_worker_plugin("kill")
            break
        except OSError:  # the scheduler's call to a worker the plugin was killing broke
            if attempt == 4:
                raise
            time.sleep(1)
        except ValueError:  # the broken call had already dropped it from the scheduler
            break
    with contextlib.suppress(TimeoutError):  # a nanny slow to restart its worker: the
        client.wait_for_workers(2, timeout=60)  # module's later searches need only one
    client.run(drop_kill_plugin)  # a worker the broken call missed may still hold it
    client.close()


def drop_kill_plugin(dask_worker):
    dask_worker.plugins.pop("kill", None)


def test_worker_lost_mid_search_reruns_its_shard(cluster, case, killer, tmp_path,
                                                 small_tabular):
    expected = small_tabular
    killer("gblastn-traceback-", str(tmp_path / "killed"))
    got = search(case, "small", TABULAR, spec=on(cluster, shards=2), max_target_seqs=2)
    assert (tmp_path / "killed").exists()
    assert got == expected


def test_worker_lost_mid_replicated_search_redoes_its_batch(cluster, case, killer, tmp_path,
                                                           small_tabular):
    """The worker that searched a batch dies as its traceback starts: the batch is traced
    on the other, which redoes the preliminary search where it did not make it."""
    expected = small_tabular
    killer("gblastn-finish-", str(tmp_path / "killed"))
    got = search(case, "small", TABULAR, spec=on(cluster, mode="replicate"), max_target_seqs=2)
    assert (tmp_path / "killed").exists()
    assert got == expected


def test_worker_lost_mid_shared_last_batch_redoes_its_shard(cluster, case, killer, tmp_path):
    """A replicated search's last batch shared by both workers: the worker tracing its shard
    dies, and the other redoes that shard's preliminary search and traceback."""
    expected = search(case, "mixed", TABULAR, "blastn")
    killer("gblastn-traceback-", str(tmp_path / "killed"))
    got = search(case, "mixed", TABULAR, "blastn", on(cluster, mode="replicate"))
    assert (tmp_path / "killed").exists()
    assert got == expected


def test_search_that_cannot_finish_leaves_no_output(cluster, case, killer, tmp_path):
    allowed = cluster.scheduler.allowed_failures
    cluster.scheduler.allowed_failures = 0
    out = tmp_path / "out.txt"
    killer("gblastn-prelim-", None)
    try:
        with pytest.raises(ClusterError, match="died"):
            run_search([case["queries"]["small"]], case["db"], make_options("megablast"),
                       OutputSpec(TABULAR, str(out), None, "db"),
                       settings=RunSettings(cluster=on(cluster, shards=2)))
    finally:
        cluster.scheduler.allowed_failures = allowed
    assert not out.exists() and not list(tmp_path.iterdir())


def test_serve_then_search_from_the_command_line(case, tmp_path, small_tabular):
    """gblastn serve holds the database; searches sent to it give the single search's
    output; interrupted, it stops and removes its scheduler file."""
    scheduler_file = tmp_path / "scheduler.json"
    serve = subprocess.Popen([sys.executable, "-m", "gblastn", "serve", "-db", case["db"],
                              "-workers", "1", "-device", "cpu", "-scheduler_file",
                              str(scheduler_file)], stderr=subprocess.PIPE, text=True,
                             preexec_fn=sigint_by_default)
    try:
        assert any("serving" in line for line in iter(serve.stderr.readline, "")
                   if line.startswith("gblastn") or "serving" in line), "serve did not start"
        out = tmp_path / "out.txt"
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "gblastn", "search",
                               "-db", case["db"], "-query", case["queries"]["small"],
                               "-outfmt", TABULAR, "-max_target_seqs", "2", "-out", str(out),
                               "-scheduler_file", str(scheduler_file)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert out.read_bytes() == small_tabular
        # sent through serve's door, the search imported neither Dask nor numba
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
        assert "gblastn.drivers.served" in imported
        assert not imported & {"distributed", "dask", "numba"}
    finally:
        serve.send_signal(signal.SIGINT)
        code = serve.wait(timeout=60)
    assert code == 0
    assert not scheduler_file.exists()


def test_door_makes_a_databases_statistics_once(tmp_path, monkeypatch):
    """The statistics' checksum of every subject's length (0.37 s for 10 million subjects)
    is made once by serve's process, not at every search sent to it. (A database of its
    own: one that a failed search left open cannot be opened again in this process.)"""
    from gblastn.drivers.served import SearchDoor
    from gblastn.shards import DatabaseStatistics

    fasta = tmp_path / "s.fa"
    fasta.write_text(">s1\nACGTACGTTGCA\n>s2\nGGGTTTAAACCC\n")
    db = str(make_db([str(fasta)], str(tmp_path / "sdb"), progress=False))
    made = []
    real = DatabaseStatistics.of.__func__
    monkeypatch.setattr(DatabaseStatistics, "of",
                        classmethod(lambda cls, db: made.append(db) or real(cls, db)))
    door = SearchDoor(None, "127.0.0.1")
    try:
        first, second = door.database(db), door.database(db)
    finally:
        door.close()
    assert first is second and len(made) == 1
    assert first[1] == real(DatabaseStatistics, first[0])
