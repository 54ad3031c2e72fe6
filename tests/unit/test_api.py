"""The Python API (gblastn.search): the pipeline driver on num_threads threads, with the
same results for any thread count."""

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
    assert ran == {"gapped": {"gblastn-cpu0"}, "traceback": {"gblastn-cpu0"}}
    ran = {"gapped": set(), "traceback": set()}
    assert search(query, db, task="megablast", num_threads=3) == alone
    pool = {f"gblastn-cpu{i}" for i in range(3)} | {f"gblastn-prelim{i}" for i in range(3)}
    assert ran["gapped"] and ran["gapped"] <= pool
    assert ran["traceback"] and ran["traceback"] <= pool
    assert len(ran["gapped"] | ran["traceback"]) > 1


def _hsp_values(results) -> list:
    """Every HSP's values but the query's id."""
    return [[(hsp.hit_id, hsp.score, hsp.evalue, hsp.query_start, hsp.query_end, hsp.hit_start,
              hsp.hit_end, hsp.query_seq, hsp.hit_seq) for hsp in result.hsps]
            for result in results]


def test_a_path_fasta_text_and_seqrecords_give_the_same_results(case):
    import pathlib

    from Bio import SeqIO

    from gblastn import search

    db, query = case
    from_path = search(query, db)
    assert sum(len(result.hsps) for result in from_path) > 20
    records = list(SeqIO.parse(query, "fasta"))
    assert search(records, db) == from_path
    assert search(iter(records), db) == from_path
    assert search(pathlib.Path(query), db) == from_path
    with open(query) as handle:
        assert search(handle.read(), db) == from_path
    assert search(records[0], db) == from_path[:1]
    from_strings = search([str(record.seq) for record in records], db)
    assert [result.id for result in from_strings] == [f"Query_{n}" for n in range(1, 10)]
    assert _hsp_values(from_strings) == _hsp_values(from_path)


def test_seqrecord_deflines_are_those_of_the_fasta_biopython_writes():
    from Bio.Seq import Seq
    from Bio.SeqRecord import SeqRecord

    from gblastn.errors import InputError
    from gblastn.query import read_queries

    records = [SeqRecord(Seq("ACGTacgt"), id="x1", description="x1 two words"),
               SeqRecord(Seq("ACGT"), id="x2", description="other words"),
               SeqRecord(Seq("ACGT"), id="x3"),
               SeqRecord(Seq("ACGT"), id="", description="")]
    queries = read_queries(records + [">y1 from text\nACGT\n", "ACGT"])
    assert [(q.id, q.defline) for q in queries] == [
        ("x1", "x1 two words"), ("x2", "x2 other words"), ("x3", "x3 <unknown description>"),
        ("Query_4", ""), ("y1", "y1 from text"), ("Query_6", "")]
    assert queries[0].lowercase.tolist() == [False] * 4 + [True] * 4
    with pytest.raises(InputError, match=r"query 2 \(bad\): invalid character '\*'"):
        read_queries([records[1], SeqRecord(Seq("AC*T"), id="bad")])
    with pytest.raises(InputError, match=r"query 1: 3 \(int\) is not a query"):
        read_queries([3])


def test_search_iter_reads_a_bounded_way_ahead_of_its_results(case):
    """The first result comes while an endless input is read no further than blastn's first
    batch (5,000 letters), the second one guessed at the largest size beside it, and the
    pipeline's queue of queries; closed, the search stops."""
    import itertools

    from Bio import SeqIO

    from gblastn import search, search_iter
    from gblastn.drivers.pipeline import QUERIES_AHEAD
    from gblastn.engine import QUERY_CHUNK_LETTERS

    db, query = case
    pulled = []
    every = list(SeqIO.parse(query, "fasta"))

    def records():
        for record in itertools.cycle(every):
            pulled.append(len(record))
            yield record

    results = search_iter(records(), db)
    assert pulled == []
    first = next(results)
    longest = max(len(record) for record in every)
    assert first.id == "qs1" and 0 < sum(pulled) <= \
        5_000 + QUERY_CHUNK_LETTERS["megablast"] + (QUERIES_AHEAD + 2) * longest
    following = [next(results) for _ in range(len(every) - 1)]
    results.close()
    assert [first, *following] == search(query, db)


def test_a_mistyped_option_names_the_closest_one(case):
    from gblastn import make_options, search, search_iter
    from gblastn.errors import OptionsError

    db, query = case
    with pytest.raises(OptionsError, match="unknown option 'evalu': did you mean 'evalue'"):
        search(query, db, evalu=1e-5)
    with pytest.raises(OptionsError, match="unknown option 'evalu'"):
        search_iter(query, db, evalu=1e-5)  # at the call, before any result
    with pytest.raises(OptionsError, match="unknown option 'strands'"):
        make_options("blastn", strands="plus")
    with pytest.raises(OptionsError, match="unknown option 'wordsize': did you mean 'word_size'"):
        search(query, db, wordsize=11)


def test_conversions_without_biopython_name_the_package(case, monkeypatch):
    import sys

    from gblastn import search
    from gblastn.errors import MissingPackageError

    db, query = case
    hsp = search(query, db)[0].hsps[0]
    for module in ("Bio.SearchIO", "Bio.Align"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails as without Biopython
    with pytest.raises(MissingPackageError, match="needs the biopython package"):
        hsp.to_alignment()


def test_help_shows_the_public_api_and_every_option_default():
    import pydoc

    import gblastn
    from gblastn.options import option_names

    text = pydoc.render_doc(gblastn, renderer=pydoc.plaintext)
    functions = text.split("\nFUNCTIONS\n", 1)[1].split("\nDATA\n", 1)[0]
    assert "search_iter(" in functions and "make_db(" in functions
    assert "searched_records" not in functions and "SUBMODULES" not in text
    assert all(f"    {name}=" in text for name in option_names())
    assert "evalue=10.0" in text and "word_size=28  (dc-megablast: 11; blastn: 11; blastn-short: 7)" in text
    assert "evalue=10.0" in gblastn.search.__doc__
