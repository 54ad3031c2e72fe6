"""Golden tests: -subject FASTA searches give blastn's output line for line (the subjects'
letters and count for E-values, their ids, no titles, outfmt 7's '# Database:' line), and
its pairwise and XML reports byte for byte (no database named, the deflines as blastn reads
them, Subject_N for a subject without one)."""

import pytest

from golden import compare_lines, gblastn, megablast_case, needs_blast, write_fasta

pytestmark = [pytest.mark.golden, needs_blast]

COLUMNS = ("7 qseqid sseqid sacc saccver sallseqid stitle salltitles sgi slen qstart qend "
           "sstart send evalue bitscore length nident gaps gapopen btop sseq")


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    folder = tmp_path_factory.mktemp("subject")
    subjects, queries = megablast_case(str(folder))
    with open(subjects) as handle:
        first = handle.read().split(">")[1]
    one = write_fasta(folder / "one.fa", [])
    with open(one, "w") as handle:
        handle.write(">" + first)
    return {"subjects": subjects, "one": one, "query": queries["small"], "folder": folder}


def _blastn(*args) -> list:
    import subprocess

    return subprocess.run(["blastn", *args], check=True, capture_output=True,
                          text=True).stdout.splitlines()


@pytest.mark.parametrize("task", ["megablast", "blastn"])
@pytest.mark.parametrize("subjects", ["subjects", "one"])
def test_subject_search_matches_blastn(case, task, subjects, tmp_path):
    _same_lines_as_blastn(tmp_path, "-task", task, "-query", case["query"], "-subject",
                          case[subjects], "-outfmt", COLUMNS)


def _same_lines_as_blastn(tmp_path, *args: str) -> None:
    """gblastn's output file of the search `args` has blastn's lines, and there are many."""
    expected = _blastn(*args)
    out = tmp_path / "ours.out"
    done = gblastn("search", *args, "-out", str(out))
    assert done.returncode == 0, done.stderr
    got = out.read_text().splitlines()
    assert not compare_lines(expected, got), compare_lines(expected, got)
    assert len(expected) > 20


def test_subject_or_db(case):
    for extra in ([], ["-db", case["subjects"], "-subject", case["subjects"]]):
        done = gblastn("search", "-query", case["query"], *extra)
        assert done.returncode == 2 and "give one of -db and -subject" in done.stderr


# deflines of every kind blastn reads apart: ids of several types, a title with runs of
# spaces and a tab, none at all
DEFLINES = ["", "gi|12345|gb|AB000001.1| genbank title",
            "NM_000001.1 refseq title", "lcl|locX local title", "subjA tiny", "  spaced   out\tcut",
            "gnl|mydb|tag7 general title", "dupB identical copies", "gb|AB000002 no bar",
            "sp|P12345.1|NAME_HUMAN protein-like"]


@pytest.fixture(scope="module")
def varied(case):
    with open(case["subjects"]) as handle:
        records = handle.read().split(">")[1:]
    letters = [record.split("\n", 1)[1] for record in records]
    named = case["folder"] / "varied.fa"
    named.write_text("".join(f">{defline}\n{seq}" for defline, seq in zip(DEFLINES, letters)))
    headerless = case["folder"] / "headerless.fa"
    headerless.write_text(letters[0])
    return {"varied": str(named), "headerless": str(headerless)}


def _same_report(args, tmp_path) -> str:
    expected = "\n".join(_blastn(*args))
    out = tmp_path / "ours.out"
    done = gblastn("search", *args, "-out", str(out), "-device", "cpu")
    assert done.returncode == 0, done.stderr
    got = out.read_text().rstrip("\n")
    assert got == expected.rstrip("\n"), compare_lines(expected.splitlines(), got.splitlines())
    return expected


@pytest.mark.parametrize("outfmt", ["0", "5"])
@pytest.mark.parametrize("task", ["megablast", "blastn"])
@pytest.mark.parametrize("subjects", ["subjects", "one", "varied", "headerless"])
def test_pairwise_and_xml_reports_as_blastn(case, varied, outfmt, task, subjects, tmp_path):
    source = case.get(subjects) or varied[subjects]
    report = _same_report(["-task", task, "-query", case["query"], "-subject", source,
                           "-outfmt", outfmt], tmp_path)
    if outfmt == "0":
        assert "Database: User specified sequence set (Input:" in report
        assert "Posted date:  Unknown" in report and "\n> " in report
    else:
        assert "<BlastOutput_db></BlastOutput_db>" in report and "<Hit_accession>Subject_" \
            in report
    if subjects in ("varied", "headerless") and outfmt == "5":
        assert "<Hit_id>Subject_1</Hit_id>\n  <Hit_def>No definition line</Hit_def>" in report


@pytest.mark.parametrize("outfmt", ["0", "5"])
@pytest.mark.parametrize("location", [["-subject_loc", "5-30000"],
                                      ["-query_loc", "100-1500"]])
def test_located_reports_as_blastn(case, varied, outfmt, location, tmp_path):
    _same_report(["-task", "megablast", "-query", case["query"], "-subject", varied["varied"],
                  "-outfmt", outfmt, *location], tmp_path)


def test_a_subject_without_a_defline_in_tabular_columns_as_blastn(case, varied, tmp_path):
    report = _same_report(["-query", case["query"], "-subject", varied["varied"], "-outfmt",
                           "7 qseqid sseqid sacc saccver stitle sallseqid"], tmp_path)
    assert "\tSubject_1\tSubject_1\tSubject_1\tN/A\tSubject_1\n" in report


@pytest.fixture(scope="module")
def not_ascii(case):
    """Subjects whose deflines are UTF-8, Latin-1, and one long enough to be cut in the
    descriptions after a letter of two bytes."""
    with open(case["subjects"]) as handle:
        letters = [record.split("\n", 1)[1].encode() for record in handle.read().split(">")[1:]]
    path = case["folder"] / "not_ascii.fa"
    path.write_bytes(b"".join([
        ">café crème brûlée\n".encode() + letters[0],
        b">caf\xe9 cr\xe8me\n" + letters[1],
        b">long " + b"x" * 50 + b" caf\xc3\xa9 " + b"y" * 30 + b"\n" + letters[3]]))
    return str(path)


@pytest.mark.parametrize("outfmt", ["0", "6 qseqid sseqid stitle evalue", "5"])
def test_deflines_that_are_not_ascii_as_blastn(case, not_ascii, outfmt, tmp_path):
    """Byte for byte: blastn copies the bytes to its tabular report, reads a defline that
    is not UTF-8 as Latin-1 in its pairwise report, and counts a title's bytes to cut and
    pad it there. (In XML blastn writes a UTF-8 defline as Latin-1 bytes, gblastn as it
    came: compared on the Latin-1 one.)"""
    import subprocess

    args = ["-query", case["query"], "-subject", not_ascii, "-outfmt", outfmt]
    theirs = subprocess.run(["blastn", *args], capture_output=True, check=True).stdout
    out = tmp_path / "ours.out"
    done = gblastn("search", *args, "-out", str(out), "-device", "cpu")
    assert done.returncode == 0, done.stderr
    ours = out.read_bytes()
    if outfmt == "5":
        ours_hits, theirs_hits = (text.split(b"<Hit>") for text in (ours, theirs))
        latin = [number for number, hit in enumerate(theirs_hits)
                 if b"caf\xe9 cr\xe8me</Hit_def>" in hit]
        assert latin and all(ours_hits[number] == theirs_hits[number] for number in latin)
    else:
        assert ours == theirs
        assert "café".encode() in theirs


@pytest.mark.parametrize("outfmt", ["0", "5", "7 qseqid sseqid evalue bitscore"])
def test_subjects_without_letters_as_blastn(case, varied, outfmt, tmp_path):
    """Records without letters among the subjects: warned about, counted in the statistics
    and in the pairwise report's number of sequences, never hit."""
    with open(varied["varied"]) as handle:
        records = handle.read().split(">")[1:3]
    path = tmp_path / "with_empty.fa"
    path.write_text(">empty one\n>" + records[0] + ">empty two\n\n>" + records[1] + ">last\n")
    report = _same_report(["-task", "blastn", "-query", case["query"], "-subject", str(path),
                           "-outfmt", outfmt], tmp_path)
    if outfmt == "0":
        assert "  Number of sequences in database:  5\n" in report


@pytest.mark.parametrize("outfmt", ["0", "5", "7 qseqid sseqid evalue bitscore"])
@pytest.mark.parametrize("extra", [[], ["-dbsize", "1000"], ["-searchsp", "5000"]],
                         ids=["own", "dbsize", "searchsp"])
def test_subjects_all_without_letters_as_blastn(case, outfmt, extra, tmp_path):
    """No subject with a letter: blastn warns of each and reports no hits, its search space
    0 (or that of -dbsize against one subject); an input without any record is refused."""
    path = tmp_path / "all_empty.fa"
    path.write_text(">empty one\n>empty two\n\n")
    report = _same_report(["-query", case["query"], "-subject", str(path), "-outfmt", outfmt,
                           *extra], tmp_path)
    if outfmt == "0" and not extra:
        assert "Effective search space used: 0\n" in report
    path.write_text("\n")
    done = gblastn("search", "-query", case["query"], "-subject", str(path))
    assert done.returncode == 2 and "no sequences found" in done.stderr


@pytest.fixture(scope="module")
def lower_case(case):
    """The subjects with stretches of each in lower case: one whole, others in part."""
    with open(case["subjects"]) as handle:
        records = [record.split("\n", 1) for record in handle.read().split(">")[1:]]
    path = case["folder"] / "lower.fa"
    with open(path, "w") as handle:
        for k, (defline, letters) in enumerate(records[:12]):
            letters = letters.replace("\n", "")
            if k % 3 == 0:
                letters = letters.lower()
            elif k % 3 == 1:
                cut = len(letters) // 3
                letters = letters[:cut] + letters[cut:2 * cut].lower() + letters[2 * cut:]
            handle.write(f">{defline}\n{letters}\n")
    return str(path)


@pytest.mark.parametrize("outfmt", [COLUMNS, "0", "5"])
@pytest.mark.parametrize("masking", [["-lcase_masking"], []], ids=["lcase", "none"])
def test_lower_case_subjects_masked_as_blastn(case, lower_case, outfmt, masking, tmp_path):
    """With -lcase_masking blastn masks -subject's lower-case letters as a database's soft
    masks: no seeds there, the letters shown in lower case; without it, nothing."""
    _same_lines_as_blastn(tmp_path, "-task", "megablast", "-query", case["query"],
                          "-subject", lower_case, "-outfmt", outfmt, *masking)
