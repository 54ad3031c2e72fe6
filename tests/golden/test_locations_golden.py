"""Golden tests of -query_loc and -subject_loc: the part of each query (each subject) they
name is searched, and the reports give blastn 2.12's lines: coordinates on the whole
sequence, each format's length (the tabular qlen counts the letters asked for, XML and JSON
those searched, the pairwise report and SAM the whole query), a query the location starts
after left out; and blastn's refusals of bad locations, in its words."""

import subprocess

import pytest

from golden import assert_blastn_found_hits, compare_lines, gblastn, golden_databases, \
    megablast_case, needs_blast
from reliability import assert_one_line_error

pytestmark = [pytest.mark.golden, needs_blast]

COLUMNS = "6 std score qlen slen qcovs qcovhsp qcovus"
# lines that differ by design: the database's build time, and SAM's program line
OWN_LINES = ("    Posted date:", "@PG\t")


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    case = golden_databases(tmp_path_factory.mktemp("locations"), megablast_case)
    # the first two subjects, which every query location below reaches
    with open(case["folder"] / "db.fa") as handle:
        records = handle.read().split(">")[1:3]
    case["subjects"] = str(case["folder"] / "subjects.fa")
    with open(case["subjects"], "w") as handle:
        handle.write("".join(">" + record for record in records))
    return case


def _lines(text: str) -> list:
    return [line for line in text.splitlines() if not line.startswith(OWN_LINES)]


def _same_as_blastn(case, *args: str) -> list:
    """blastn's lines, checked equal to gblastn's for the same search of `args` (-db is
    each tool's database)."""
    theirs = subprocess.run(["blastn", *args], capture_output=True, text=True)
    assert theirs.returncode == 0, theirs.stderr
    ours_args = [case["our_db"] if arg == case["blast_db"] else arg for arg in args]
    ours = gblastn("search", "-device", "cpu", *ours_args)
    assert ours.returncode == 0, ours.stderr
    expected, got = _lines(theirs.stdout), _lines(ours.stdout.replace(case["our_db"],
                                                                       case["blast_db"]))
    assert expected == got, compare_lines(expected, got)
    return expected


QUERY_LOCATIONS = [
    ("megablast", COLUMNS, "100-1500"),  # past the end of some queries, before qs8's start
    ("blastn-short", COLUMNS, "20-50"),
    ("blastn", "0", "300-1900"),
    ("megablast", "5", "100-1500"),
    ("megablast", "15", "1000-2000"),
    ("megablast", "17", "100-1500"),
]


@pytest.mark.parametrize("task,outfmt,location", QUERY_LOCATIONS)
def test_query_locations_as_blastn(case, task, outfmt, location):
    expected = _same_as_blastn(case, "-query", case["queries"]["small"], "-db",
                               case["blast_db"], "-task", task, "-outfmt", outfmt,
                               "-query_loc", location)
    if outfmt == COLUMNS:
        assert_blastn_found_hits(expected)


def test_minus_strand_and_lower_case_masks_of_a_query_location(case):
    _same_as_blastn(case, "-query", case["queries"]["small"], "-db", case["blast_db"],
                    "-outfmt", "0", "-strand", "minus", "-lcase_masking", "-query_loc",
                    "1000-2000")


@pytest.mark.parametrize("outfmt", [COLUMNS, "17 SR SQ"])
def test_subject_locations_as_blastn(case, outfmt):
    expected = _same_as_blastn(case, "-query", case["queries"]["small"], "-subject",
                               case["subjects"], "-outfmt", outfmt, "-subject_loc",
                               "1500-99999", "-query_loc", "50-2800")
    assert len(expected) > 10


@pytest.mark.parametrize("outfmt", [COLUMNS, "7", "0"])
def test_a_subject_location_just_past_a_subjects_end_leaves_it_without_letters(
        case, outfmt, tmp_path):
    """-subject_loc starting just after a subject's last letter: blastn warns of it and
    searches the others."""
    with open(case["subjects"]) as handle:
        records = handle.read().split(">")[1:]
    short = tmp_path / "short_first.fa"
    short.write_text(">short one\n" + "".join(records[0].split("\n")[1:])[:1499] + "\n>" +
                     records[1])
    args = ["-query", case["queries"]["small"], "-subject", str(short), "-outfmt", outfmt,
            "-subject_loc", "1500-99999"]
    expected = _same_as_blastn(case, *args)
    assert len(expected) > 5
    warning = "Warning: [blastn] Subject_1 short one: Subject sequence contains no data"
    theirs = subprocess.run(["blastn", *args], capture_output=True, text=True).stderr
    ours = gblastn("search", "-device", "cpu", *args).stderr
    assert warning in theirs and warning in ours


@pytest.mark.parametrize("outfmt", [COLUMNS, "7", "0", "5"])
def test_a_subject_location_past_every_subject_finds_nothing_as_blastn(case, outfmt,
                                                                      tmp_path):
    """-subject_loc starting just after the last letter of every subject: each is warned
    about, and the report has no hits, as blastn's."""
    records = [record.split("\n", 1) for record in open(case["subjects"]).read().split(">")[1:]]
    letters = [body.replace("\n", "") for _, body in records]
    length = min(len(text) for text in letters)
    even = tmp_path / "even.fa"
    even.write_text("".join(f">{defline}\n{text[:length]}\n"
                            for (defline, _), text in zip(records, letters)))
    args = ["-query", case["queries"]["small"], "-subject", str(even), "-outfmt", outfmt,
            "-subject_loc", f"{length + 1}-{length + 50}"]
    _same_as_blastn(case, *args)
    ours = gblastn("search", "-device", "cpu", *args).stderr
    assert ours.count("Subject sequence contains no data") == 2


@pytest.mark.parametrize("flag,location,reason", [
    ("-query_loc", "5-3", "start cannot be larger than stop"),
    ("-query_loc", "0-10", "range elements cannot be less than or equal to 0"),
    ("-query_loc", "10", "Format: start-stop"),
    ("-subject_loc", "7-7", "range cannot be empty")])
def test_bad_locations_are_refused_in_blastns_words(case, flag, location, reason):
    out = case["folder"] / "refused.out"
    done = gblastn("search", "-query", case["queries"]["small"], "-subject", case["subjects"],
                   "-out", str(out), flag, location)
    what = flag[1:].split("_")[0]
    assert assert_one_line_error(done, 2) == \
        f"gblastn: error: Invalid specification of {what} location ({reason})"
    assert not out.exists()
    theirs = subprocess.run(["blastn", "-query", case["queries"]["small"], "-subject",
                             case["subjects"], flag, location], capture_output=True, text=True)
    assert theirs.returncode != 0 and f"{what} location ({reason})" in theirs.stderr


def test_a_subject_location_needs_subjects(case):
    done = gblastn("search", "-query", case["queries"]["small"], "-db", case["our_db"],
                   "-subject_loc", "1-100")
    message = 'Argument "subject_loc". Incompatible with argument:  `db\''
    assert assert_one_line_error(done, 2) == f"gblastn: error: {message}"
    theirs = subprocess.run(["blastn", "-query", case["queries"]["small"], "-db",
                             case["blast_db"], "-subject_loc", "1-100"],
                            capture_output=True, text=True)
    assert theirs.returncode != 0 and message in theirs.stderr


@pytest.mark.parametrize("outfmt", ["7", "0", "5"])
def test_a_location_just_past_a_querys_end_leaves_it_without_hits(case, outfmt, tmp_path):
    """-query_loc starting just after a query's last letter: blastn warns, reports it
    without hits and searches the others; for a lone query it fails."""
    with open(case["queries"]["small"]) as handle:
        letters = handle.read().split(">")[1].split("\n", 1)[1].replace("\n", "")
    query = tmp_path / "lengths.fa"
    query.write_text(f">long one\n{letters[:60]}\n>short two\n{letters[:19]}\n"
                     f">long three\n{letters[5:70]}\n")
    args = ["-task", "blastn-short", "-query", str(query), "-db", case["blast_db"],
            "-outfmt", outfmt, "-query_loc", "20-300"]
    _same_as_blastn(case, *args)
    ours = gblastn("search", "-device", "cpu",
                   *[case["our_db"] if arg == case["blast_db"] else arg for arg in args])
    warning = "Warning: [blastn] Query_2 short two: Sequence contains no data \n"
    theirs = subprocess.run(["blastn", *args], capture_output=True, text=True).stderr
    # the XML report carries it instead
    assert (warning in theirs) == (warning in ours.stderr) == (outfmt != "5")
    lone = tmp_path / "lone.fa"
    lone.write_text(f">short\n{letters[:19]}\n")
    done = gblastn("search", "-query", str(lone), "-db", case["our_db"], "-query_loc", "20-300")
    assert "Sequence contains no data" in assert_one_line_error(done, 2)


@pytest.mark.parametrize("location", ["1-10", "2-10"])
def test_an_empty_record_under_a_location_is_warned_about_as_blastn_does(case, location,
                                                                      tmp_path):
    """-query_loc over a record without letters: blastn warns of it once where the
    location starts at its end (the first letter), and not at all where it starts later
    (the record is left out)."""
    with open(case["queries"]["small"]) as handle:
        letters = handle.read().split(">")[1].split("\n", 1)[1].replace("\n", "")
    query = tmp_path / "empty.fa"
    query.write_text(f">empty one\n\n>long two\n{letters[:60]}\n>empty three\n\n")
    args = ["-query", str(query), "-outfmt", "7", "-query_loc", location]
    theirs = subprocess.run(["blastn", "-db", case["blast_db"], *args], capture_output=True,
                            text=True)
    ours = gblastn("search", "-device", "cpu", "-db", case["our_db"], *args)
    assert theirs.returncode == ours.returncode == 0, ours.stderr
    warned = [line for line in theirs.stderr.splitlines() if line.startswith("Warning")]
    assert len(warned) == (2 if location == "1-10" else 0)
    assert warned == [line for line in ours.stderr.splitlines() if line.startswith("Warning")]


@pytest.mark.parametrize("outfmt", ["7", "0"])
def test_a_location_over_an_empty_query_file_as_blastn(case, outfmt, tmp_path):
    """No queries at all: blastn warns "Query is Empty!" and writes an empty report, with
    or without -query_loc (gblastn refused the location)."""
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    args = ["-query", str(empty), "-db", case["blast_db"], "-outfmt", outfmt,
            "-query_loc", "1-20"]
    _same_as_blastn(case, *args)
    ours = gblastn("search", "-device", "cpu", *[case["our_db"] if arg == case["blast_db"]
                                                 else arg for arg in args])
    assert "Warning: [blastn] Query is Empty!" in ours.stderr


@pytest.mark.parametrize("location", ["1-200", "100-400"])
def test_the_masking_of_a_location_masked_whole_as_blastn(case, location, tmp_path):
    """JSON and XML2 list a query's masking only where the part searched is not masked end
    to end (blastn looks at the part, not the whole query)."""
    with open(case["queries"]["small"]) as handle:
        letters = handle.read().split(">")[1].split("\n", 1)[1].replace("\n", "")
    query = tmp_path / "lower.fa"
    query.write_text(f">lower first part\n{letters[:300].lower()}{letters[300:1200]}\n")
    for outfmt in ("15", "16"):
        expected = _same_as_blastn(case, "-query", str(query), "-db", case["blast_db"],
                                   "-outfmt", outfmt, "-lcase_masking", "-query_loc",
                                   location)
        assert ("query" in "".join(expected) and
                ("masking" in "".join(expected)) == (location == "100-400"))


def test_a_location_past_every_query_is_refused(case):
    done = gblastn("search", "-query", case["queries"]["small"], "-db", case["our_db"],
                   "-query_loc", "100000-100010")
    assert "Empty CBlastQueryVector" in assert_one_line_error(done, 2)


def test_the_api_takes_a_query_location(case):
    import gblastn as api

    expected = _same_as_blastn(case, "-query", case["queries"]["small"], "-db",
                               case["blast_db"], "-outfmt", "6 qseqid sseqid qstart qend",
                               "-query_loc", "100-1500")
    results = api.search(case["queries"]["small"], case["our_db"], columns="qseqid sseqid "
                         "qstart qend", query_loc="100-1500")
    got = ["\t".join(str(record[name]) for name in ("qseqid", "sseqid", "qstart", "qend"))
           for result in results for record in result.records]
    assert got == expected, compare_lines(expected, got)
