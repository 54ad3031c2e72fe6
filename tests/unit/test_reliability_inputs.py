"""Hostile and unusual inputs and options through the real command line: what blastn accepts
is accepted and searched as blastn searches it, what it refuses is refused in one line naming
the flag or file, and never a traceback. Tests marked golden run blastn on the same inputs."""

import gzip
import os
import re
import subprocess

import pytest

from golden import assert_blastn_found_hits, needs_blast
from reliability import HAS_BLAST, World, assert_one_line_error, blastn, search


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return World(tmp_path_factory.mktemp("reliability_inputs"))


def fasta(path, records: list) -> str:
    """Write FASTA records given as (header bytes, letters) and return the path."""
    path.write_bytes(b"".join(b">" + header + b"\n" + letters.encode() + b"\n"
                              for header, letters in records))
    return str(path)


def same_as_blastn(world, *args, stdin=None, hits=True) -> tuple:
    """Both tools' (stdout bytes, stderr text) for the same search (-outfmt 6 unless
    given: blastn's default is its pairwise report); blastn's output holds hits unless
    `hits` is False."""
    if "-outfmt" not in args:
        args += ("-outfmt", "6")
    theirs = blastn(world, *args, stdin=stdin, text=False)
    ours = search(world, *args, stdin=stdin, text=False)
    assert theirs.returncode == 0, theirs.stderr
    assert ours.returncode == 0, ours.stderr
    if hits:
        assert_blastn_found_hits(theirs.stdout)
    return (theirs.stdout, theirs.stderr.decode()), (ours.stdout, ours.stderr.decode())


# -- numbers --------------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["-evalue", "-xdrop_gap", "-perc_identity"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "Infinity", "1_0", " 1"])
def test_numbers_that_are_not_finite_decimals_are_refused(world, flag, value):
    error = assert_one_line_error(search(world, "-query", world.query, flag, value), 2)
    assert flag in error and repr(value) in error


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("value", ["nan", "inf", "Infinity"])
def test_blastn_refuses_the_same_numbers(world, value):
    done = blastn(world, "-query", world.query, "-evalue", value)
    assert done.returncode != 0 and "cannot be converted" in done.stderr


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("value", ["1e400", "1.7976931348623157e308", "+5", ".5"])
def test_numbers_blastn_takes_give_its_results(world, value):
    theirs, ours = same_as_blastn(world, "-query", world.query, "-evalue", value)
    assert ours[0] == theirs[0]


@pytest.mark.parametrize("flag, value", [("-word_size", "3"), ("-word_size", "2147483648"),
                                          ("-max_target_seqs", "1e2"), ("-num_threads", "0"),
                                          ("-max_hsps", "99999999999")])
def test_integers_out_of_blastns_range_are_refused(world, flag, value):
    error = assert_one_line_error(search(world, "-query", world.query, flag, value), 2)
    assert flag in error or "word size" in error


@pytest.mark.parametrize("flag, value", [("-max_hsps", "0"), ("-max_hsps", "-1"),
                                          ("-max_target_seqs", "0"),
                                          ("-max_target_seqs", "-1")])
def test_limits_below_one_are_refused_before_any_warning(world, flag, value):
    """blastn takes -max_hsps and -max_target_seqs from 1 (0 is no limit to gblastn's
    options, never a user's value), and refuses the rest in its argument check, before the
    warning that fewer than 5 targets are examined."""
    done = search(world, "-query", world.query, flag, value)
    error = assert_one_line_error(done, 2)
    assert flag.lstrip("-") in error and "Warning" not in done.stderr


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("flag", ["-max_hsps", "-max_target_seqs"])
def test_blastn_refuses_the_same_limits(world, flag):
    done = blastn(world, "-query", world.query, flag, "0")
    assert done.returncode != 0 and "expected >=1" in done.stderr


# the queries that find their exact copy in s1 (3,000 and 300 letters) with each word size,
# as blastn finds them: a word longer than half of the copy is not found
FOUND_WITH_WORD_SIZE = {101: {"qlong", "qshort"}, 257: {"qlong", "qshort"}, 301: {"qlong"},
                        1500: {"qlong"}, 1600: set(), 2147483647: set()}


@pytest.mark.parametrize("task", ["megablast", "blastn", "blastn-short"])
@pytest.mark.parametrize("word_size", sorted(FOUND_WITH_WORD_SIZE))
def test_word_sizes_above_100_search(world, task, word_size):
    done = search(world, "-query", world.query, "-task", task, "-word_size", str(word_size),
                  "-outfmt", "6 qseqid sseqid pident")
    assert done.returncode == 0, done.stderr
    found = {line.split("\t")[0] for line in done.stdout.splitlines()
             if line.endswith("\ts1\t100.000")}
    assert found == FOUND_WITH_WORD_SIZE[word_size]


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("task", ["megablast", "blastn", "blastn-short"])
@pytest.mark.parametrize("word_size", ["4", "101", "257", "301", "1500", "1600", "2147483647"])
def test_word_sizes_give_blastns_results(world, task, word_size):
    # words longer than every copy find nothing (FOUND_WITH_WORD_SIZE's empty sets)
    theirs, ours = same_as_blastn(world, "-query", world.query, "-task", task,
                                  "-word_size", word_size, "-outfmt", "7",
                                  hits=FOUND_WITH_WORD_SIZE.get(int(word_size)) != set())
    assert ours[0] == theirs[0]


def test_threads_beyond_the_cpus_are_reduced_with_a_warning(world):
    cpus = len(os.sched_getaffinity(0))
    alone = search(world, "-query", world.query)
    done = search(world, "-query", world.query, "-num_threads", "10000")
    assert done.returncode == 0, done.stderr
    assert done.stdout == alone.stdout
    assert f"Number of threads was reduced to {cpus} to match the number of available " \
           "CPUs" in done.stderr


@needs_blast
@pytest.mark.golden
def test_thread_warning_is_blastns(world):
    theirs, ours = same_as_blastn(world, "-query", world.query, "-num_threads", "10000")
    assert ours == theirs


# -- query records --------------------------------------------------------------------------

def empty_records(world, tmp_path) -> str:
    short = world.sequences["short"]
    return fasta(tmp_path / "empty.fa", [(b"e1 empty first", ""), (b"q2 real", short),
                                         (b"", ""), (b"e4", ""), (b"q5", short),
                                         (b"e6 last", "")])


def test_empty_records_are_warned_about_and_the_search_goes_on(world, tmp_path):
    done = search(world, "-query", empty_records(world, tmp_path), "-outfmt", "7")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"Warning: [blastn] {label}: Sequence contains no data "
        for label in ("Query_1 e1 empty first", "Query_3", "Query_4 e4", "Query_6 e6 last")]
    assert done.stdout.count("# Query: ") == 6
    assert done.stdout.endswith("# BLAST processed 6 queries\n")
    assert "q2\ts1\t100.000\t300" in done.stdout and "q5\ts1\t100.000\t300" in done.stdout


@pytest.mark.parametrize("outfmt", ["5", "15", "17"])
def test_reports_that_carry_an_empty_records_warning_leave_stderr_alone(world, tmp_path,
                                                                       outfmt):
    """blastn writes the warning in the XML and JSON reports' messages (and no SAM record),
    not on stderr."""
    done = search(world, "-query", empty_records(world, tmp_path), "-outfmt", outfmt)
    assert done.returncode == 0, done.stderr
    assert "Sequence contains no data" not in done.stderr
    if outfmt == "5":
        assert "Query_1 e1 empty first: Sequence contains no data  No hits found" in done.stdout
    if HAS_BLAST:
        theirs = blastn(world, "-query", str(tmp_path / "empty.fa"), "-outfmt", outfmt)
        assert theirs.returncode == 0 and "Sequence contains no data" not in theirs.stderr


@needs_blast
@pytest.mark.golden
def test_empty_records_as_blastn(world, tmp_path):
    theirs, ours = same_as_blastn(world, "-query", empty_records(world, tmp_path),
                                  "-outfmt", "7")
    assert ours == theirs


def test_only_empty_records_fail_and_write_nothing(world, tmp_path):
    query = fasta(tmp_path / "void.fa", [(b"e1", ""), (b"e2", "")])
    out = tmp_path / "out.tsv"
    done = search(world, "-query", query, "-outfmt", "7", "-out", str(out))
    assert "Sequence contains no data" in assert_one_line_error(done, 2)
    assert done.stderr.count("Sequence contains no data ") == 2
    assert not out.exists()
    done = search(world, "-query", query, "-outfmt", "7")
    assert done.returncode == 2 and done.stdout == ""
    if HAS_BLAST:  # blastn fails on it too
        assert blastn(world, "-query", query).returncode != 0


HEADERS = [b"caf\xe9 \xff\xfe latin-1 and not UTF-8", b"q\xc3\xa9 UTF-8 \xe2\x82\xac",
           b"a  b   c  ", b"tab\tcut here", b"ctl\x01cut", b"\x02kept first", b"  \t lead",
           b"del\x7fkept", b"nbsp\xc2\xa0kept", b"", b" ", b"x" * 5000 + b" long id"]


def headers_query(world, tmp_path) -> str:
    return fasta(tmp_path / "headers.fa",
                 [(header, world.sequences["short"]) for header in HEADERS])


def test_header_bytes_are_written_as_they_came(world, tmp_path):
    done = search(world, "-query", headers_query(world, tmp_path), "-outfmt", "7 qseqid",
                  text=False, env_extra={"LC_ALL": "C"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split(b"\n")
    assert b"# Query: caf\xe9 \xff\xfe latin-1 and not UTF-8" in lines
    assert b"caf\xe9" in lines and b"q\xc3\xa9" in lines
    assert b"# Query: a  b   c" in lines and b"# Query: tab" in lines
    assert b"\xef\xbf\xbd" not in done.stdout  # no U+FFFD
    assert b"Query_10" in lines and b"Query_11" in lines  # the records without a defline


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("outfmt", ["7", "7 qseqid qacc qaccver sseqid evalue", "10 qseqid"])
def test_header_bytes_as_blastn_prints_them(world, tmp_path, outfmt):
    theirs, ours = same_as_blastn(world, "-query", headers_query(world, tmp_path),
                                  "-outfmt", outfmt)
    assert ours[0] == theirs[0]


def test_the_query_is_read_from_stdin_without_query(world):
    stdin = open(world.query).read()
    done = search(world, stdin=stdin)
    assert done.returncode == 0, done.stderr
    assert done.stdout == search(world, "-query", world.query).stdout


@needs_blast
@pytest.mark.golden
def test_stdin_query_as_blastn(world):
    theirs, ours = same_as_blastn(world, stdin=open(world.query, "rb").read())
    assert ours == theirs


# -- flags ----------------------------------------------------------------------------------

@pytest.mark.parametrize("typed, closest", [("-evlaue", "-evalue"),
                                            ("-max_target_seq", "-max_target_seqs"),
                                            ("--evalue", "-evalue"), ("-hsps", "-max_hsps"),
                                            ("-Query", "-query"), ("-zzzz", None)])
def test_a_misspelt_flag_is_named_as_typed_with_the_closest(world, typed, closest):
    done = search(world, "-query", world.query, typed, "5")
    error = assert_one_line_error(done, 2)
    assert repr(typed) in error, error
    assert (f"did you mean {closest}?" in error) if closest else ("did you mean" not in error)
    assert "No such option" not in error


def test_values_that_look_like_flags_are_values(world):
    done = search(world, "-query", world.query, "-task", "blastn", "-reward", "1",
                  "-penalty", "-2", "-evalue", "-1")
    assert "E-value" in assert_one_line_error(done, 2)  # the -1 reached the E-value check
    done = search(world, "-query", world.query, "-task", "blastn", "-reward", "1",
                  "-penalty", "-2")
    assert done.returncode == 0, done.stderr


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("typed", ["-evlaue", "-max_target_seq"])
def test_blastn_refuses_the_misspelt_flags_too(world, typed):
    done = blastn(world, "-query", world.query, typed, "5")
    assert done.returncode != 0 and "Unknown argument" in done.stderr


def _search_flags() -> set:
    import typer.main

    from gblastn.cli import HELP_FLAGS, app

    command = typer.main.get_command(app).commands["search"]
    return {name for param in command.params for name in param.opts} | set(HELP_FLAGS)


def _flags_gblastn_lacks() -> list:
    from gblastn.cli import BLASTN_FLAGS

    return sorted(BLASTN_FLAGS - _search_flags() - {"-version"})


@pytest.mark.parametrize("flag", _flags_gblastn_lacks())
def test_blastn_flags_gblastn_lacks_are_refused_by_name(world, flag):
    """Before the value is read, so that flags blastn takes bare (-html) and with a value
    (-culling_limit 2) are named alike, never as a misspelling of another flag."""
    for args in ([flag], [flag, "2"]):
        error = assert_one_line_error(search(world, "-query", world.query, *args), 2)
        if flag not in ("-entrez_query", "-remote"):
            assert error == f"gblastn: error: option {flag} is not supported by gblastn"


@pytest.mark.parametrize("args", [["-entrez_query", "human[orgn]"],
                                  ["-entrez_query", "human[orgn]", "-remote"]])
def test_the_remote_options_are_refused_as_blastn_refuses_them(world, args):
    error = assert_one_line_error(search(world, "-query", world.query, *args), 2)
    if "-remote" in args:
        assert error == ("gblastn: error: option -remote is not supported by gblastn: it "
                         "searches local databases and -subject files only")
    else:
        assert error == ('gblastn: error: Argument "remote". Must be specified, as it is '
                         "required by argument:  `entrez_query'")


@needs_blast
@pytest.mark.golden
def test_the_refused_flags_are_blastns(world):
    """The list of blastn's flags is blastn 2.12's own, and -entrez_query's refusal its
    words."""
    from gblastn.cli import BLASTN_FLAGS

    usage = subprocess.run(["blastn", "-help"], capture_output=True, text=True).stdout
    usage = usage.split("DESCRIPTION")[0]
    assert set(re.findall(r"\[(-\w+)", usage)) == BLASTN_FLAGS
    done = blastn(world, "-query", world.query, "-entrez_query", "human[orgn]")
    assert done.returncode != 0
    assert ('Argument "remote". Must be specified, as it is required by argument:  '
            "`entrez_query'") in done.stderr


# -- hostile files --------------------------------------------------------------------------

def hostile_files(world, folder) -> dict:
    (folder / "garbage.fa").write_bytes(bytes(range(256)) * 40)
    whole = gzip.compress(open(world.query, "rb").read())
    (folder / "truncated.fa.gz").write_bytes(whole[:len(whole) // 2])
    (folder / "nul.fa").write_bytes(b">q\n\x00\x00\x00\x00\nACGT\n")  # not sequence
    (folder / "a_folder").mkdir()
    (folder / "folder_as_list").mkdir()
    return {name: str(folder / name) for name in
            ("garbage.fa", "truncated.fa.gz", "nul.fa", "a_folder")}


@pytest.mark.parametrize("name", ["garbage.fa", "truncated.fa.gz", "nul.fa", "a_folder"])
def test_hostile_query_files_get_one_line_errors(world, tmp_path, name):
    path = hostile_files(world, tmp_path)[name]
    out = tmp_path / "out.tsv"
    error = assert_one_line_error(search(world, "-query", path, "-out", str(out)), 2)
    assert path in error
    assert not out.exists() and not [n for n in os.listdir(tmp_path) if n.startswith(".")]


def test_hostile_query_lists_get_one_line_errors(world, tmp_path):
    hostile_files(world, tmp_path)
    for listing in (tmp_path / "folder_as_list", tmp_path / "garbage.fa"):
        error = assert_one_line_error(search(world, "-query_list", str(listing)), 2)
        assert str(listing) in error or "garbage" in error


def test_line_ends_and_odd_names_do_not_change_the_results(world, tmp_path):
    text = open(world.query, "rb").read()
    (tmp_path / "crlf.fa").write_bytes(text.replace(b"\n", b"\r\n"))
    odd_name = os.fsdecode(b"q\xe9ry.fa")  # a file name that is not UTF-8
    (tmp_path / odd_name).write_bytes(text)
    (tmp_path / "list.txt").write_bytes(b"q\xe9ry.fa\n")
    expected = search(world, "-query", world.query).stdout
    assert search(world, "-query", str(tmp_path / "crlf.fa")).stdout == expected
    done = search(world, "-query_list", str(tmp_path / "list.txt"))
    assert done.returncode == 0 and done.stdout == expected, done.stderr
