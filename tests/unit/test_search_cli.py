"""The search command and the Python API on bad and unusual input: one-line errors and
non-zero exit codes, never a traceback, never a partial output file; BLAST-like results for
queries that cannot hit; -out_dir, the API's typed records, -device gpu without a GPU, and
which command lines start the device's context early."""

import os

import pytest

from golden import gblastn, megablast_case


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    from gblastn.db.writer import make_db

    folder = tmp_path_factory.mktemp("search_cli")
    db_fasta, queries = megablast_case(str(folder))
    return {"db": make_db([db_fasta], str(folder / "db"), progress=False),
            "query": queries["small"], "folder": folder}


def search(case, *args):
    return gblastn("search", "-db", case["db"], "-device", "cpu", *args)


def assert_one_line_error(done, code=None):
    assert done.returncode != 0
    if code is not None:
        assert done.returncode == code, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("gblastn: error:")]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr


def write(path, text):
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("args, code", [
    (["-query", "no-such-file.fa"], 2),
    (["-query_list", "no-such-list.txt"], 2),
    (["-query", "no-such-file.fa", "-query_list", "no-such-list.txt"], 2),  # both
    (["-outfmt", "6 qseqid no_such_column"], 2),
    (["-task", "dc-nonsense"], 2),
    (["-evalue", "abc"], 2),
    (["-reward", "1", "-penalty", "-2", "-gapopen", "9", "-gapextend", "0"], 2),
    (["-word_size", "3"], 2),
    (["-strand", "sideways"], 2),
    (["-dust", "maybe"], 2),
    (["-xdrop_gap", "1e308"], 2),  # a raw score past 32 bits
    (["-xdrop_ungap", "1e300"], 2),
    (["-task", "blastn", "-xdrop_gap_final", "1e20"], 2),
])
def test_bad_options_and_files(case, args, code):
    needs_query = not any(a in ("-query", "-query_list") for a in args) and args
    done = search(case, *(["-query", case["query"]] if needs_query else []), *args)
    assert_one_line_error(done, code)


def test_missing_and_damaged_database(case, tmp_path):
    done = gblastn("search", "-db", str(tmp_path / "nothing"), "-query", case["query"])
    assert_one_line_error(done, 3)
    damaged = tmp_path / "damaged.gdb"
    damaged.mkdir()
    (damaged / "manifest.json").write_text("{not json")
    done = gblastn("search", "-db", str(tmp_path / "damaged"), "-query", case["query"])
    assert_one_line_error(done, 3)


def test_unwritable_output(case, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = search(case, "-query", case["query"], "-out", str(blocker / "out.tsv"))
    assert_one_line_error(done, 4)


def test_a_first_line_that_is_not_sequence_is_refused(case, tmp_path):
    done = search(case, "-query", write(tmp_path / "bad.fa", ">q\n..,,..\nACGT\n"))
    assert_one_line_error(done, 2)
    assert "bad.fa:2" in done.stderr and "doesn't look like plausible data" in done.stderr


def test_invalid_query_letters_are_dropped_with_blastns_warning(case, tmp_path):
    done = search(case, "-query", write(tmp_path / "odd.fa", ">q\nACGT*ACGT\n"))
    assert done.returncode == 0, done.stderr
    assert "FASTA-Reader: Ignoring invalid residues at position(s): On line 2: 5\n" \
        in done.stderr


def test_queries_that_cannot_hit_give_no_lines_and_no_error(case, tmp_path):
    query = write(tmp_path / "odd.fa", ">short\nACGTACGTAC\n>allN\n" + "N" * 300 + "\n"
                  ">masked\n" + "CA" * 200 + "\n")
    out = tmp_path / "odd.tsv"
    done = search(case, "-query", query, "-out", str(out), "-outfmt", "7")
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.count("# BLASTN 2.12.0+") == 3
    assert text.strip().endswith("# BLAST processed 3 queries")
    assert not [line for line in text.splitlines() if line and not line.startswith("#")]


def test_empty_query_file_warns(case, tmp_path):
    out = tmp_path / "empty.tsv"
    done = search(case, "-query", write(tmp_path / "empty.fa", ""), "-out", str(out))
    assert done.returncode == 0
    assert "Warning: [blastn] Query is Empty!" in done.stderr
    assert out.read_text() == ""


def test_out_dir_writes_one_file_per_listed_query_file(case, tmp_path):
    import shutil
    shutil.copy(case["query"], tmp_path / "a.fa")
    write(tmp_path / "b.fa", ">one\n" + open(case["query"]).read().split(">")[1].split("\n", 1)[1])
    listing = write(tmp_path / "list.txt", "a.fa\nb.fa\n")
    done = search(case, "-query_list", listing, "-out_dir", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(tmp_path / "out")) == ["a.out", "b.out"]
    assert (tmp_path / "out" / "a.out").read_text().count("\n") > 10


def test_python_api_returns_typed_hit_records(case):
    import gblastn

    results = gblastn.search(case["query"], case["db"], task="megablast", evalue=1e-10)
    assert [r.id for r in results][:2] == ["qs1", "qs2"]
    hsp = results[0].hsps[0]
    assert hsp["saccver"] == "subj1" and isinstance(hsp["qstart"], int)
    assert isinstance(hsp["evalue"], float) and hsp["sstrand"] in ("plus", "minus")
    assert all(record["evalue"] <= 1e-10 for r in results for record in r.records)


def _has_gpu() -> bool:
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device.count() > 0
    except Exception:  # noqa: BLE001 - no pycuda, no driver, no device
        return False


@pytest.mark.skipif(_has_gpu(), reason="a GPU is present")
@pytest.mark.parametrize("queries", ["small", "masked"])
def test_device_gpu_without_a_gpu_is_an_error_and_auto_falls_back(case, tmp_path, queries):
    """The GPU is set up while the queries are read and indexed, and waited for at the first
    scan; -device gpu still fails cleanly when there is none, even when no query needed a
    scan (all masked)."""
    query = case["query"] if queries == "small" else \
        write(tmp_path / "masked.fa", ">masked\n" + "acgt" * 50 + "\n")
    out = tmp_path / "out.tsv"
    done = gblastn("search", "-db", case["db"], "-query", query, "-device", "gpu",
                   "-lcase_masking", "-out", str(out))
    assert_one_line_error(done, 5)
    assert "no usable GPU" in done.stderr and not out.exists()
    done = gblastn("search", "-db", case["db"], "-query", query, "-device", "auto",
                   "-lcase_masking", "-out", str(out))
    assert done.returncode == 0 and "searching on the CPU" in done.stderr
    assert out.exists()


@pytest.mark.parametrize("argv, started", [
    (["gblastn", "search", "-db", "x", "-query", "q.fa"], [0]),
    (["gblastn", "search", "-db", "x", "-device", "gpu", "-gpu_id", "2"], [2]),
    (["gblastn", "search", "-db", "x", "-device", "CPU"], []),
    (["gblastn", "search", "-gpu_id", "two"], []),
    (["gblastn", "search", "-db", "x", "-local_workers", "2"], []),  # the workers' GPUs
    (["gblastn", "search", "-db", "x", "-scheduler_file", "s.json"], []),
    (["gblastn", "makedb", "-in", "a.fa"], []),
    (["gblastn"], []),
])
def test_context_made_early_only_for_searches_that_may_use_the_gpu(argv, started, monkeypatch):
    from gblastn import cuda_context

    calls = []
    monkeypatch.setattr(cuda_context, "make_context_early", calls.append)
    cuda_context.start_context_for(argv)
    assert calls == started


@pytest.mark.parametrize("given, expected", [(None, "1"), ("4", "4")])
def test_commands_start_openblas_with_one_thread_unless_told(monkeypatch, given, expected):
    """numpy starts OpenBLAS's threads as it is imported (CPU a served search's process
    spends for nothing: gblastn calls no BLAS); a user's own setting stands."""
    import gblastn.__main__ as command
    import gblastn.cuda_context

    class Started(Exception):
        pass

    def started(argv):
        raise Started

    if given is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", given)
    monkeypatch.setattr(gblastn.cuda_context, "start_context_for", started)
    with pytest.raises(Started):
        command.main()
    assert os.environ["OPENBLAS_NUM_THREADS"] == expected
