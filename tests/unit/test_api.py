"""The Python API (gblastn.search): the serial driver on a pool of num_threads threads, with
the same results for any thread count."""

import threading

import pytest

from golden import megablast_case


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    from gblastn.db.writer import make_db

    folder = tmp_path_factory.mktemp("api")
    db_fasta, queries = megablast_case(str(folder))
    return make_db([db_fasta], str(folder / "db"), progress=False), queries["small"]


def test_num_threads_runs_the_gapped_and_traceback_work_on_that_many_threads(case,
                                                                           monkeypatch):
    from gblastn import engine, search

    db, query = case
    ran = {"gapped": set(), "traceback": set()}

    def spying(name, real):
        def spy(*args, **kwargs):
            ran[name].add(threading.current_thread().name)
            return real(*args, **kwargs)
        return spy

    monkeypatch.setattr(engine.VolumeGapped, "_extend_task",
                        spying("gapped", engine.VolumeGapped._extend_task))
    monkeypatch.setattr(engine.Engine, "trace_group",
                        spying("traceback", engine.Engine.trace_group))
    alone = search(query, db, task="megablast", num_threads=1)
    assert sum(len(q.hsps) for q in alone) > 20
    assert ran == {"gapped": {"MainThread"}, "traceback": {"MainThread"}}
    ran = {"gapped": set(), "traceback": set()}
    assert search(query, db, task="megablast", num_threads=3) == alone
    pool = {f"gblastn-task{i}" for i in range(3)}
    assert ran["gapped"] and ran["gapped"] <= pool | {"MainThread"}
    assert ran["traceback"] and ran["traceback"] <= pool
    assert len(ran["gapped"] | ran["traceback"]) > 1
