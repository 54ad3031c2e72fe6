"""Golden tests: -subject FASTA searches give blastn's output line for line (the subjects'
letters and count for E-values, their ids, no titles, outfmt 7's '# Database:' line)."""

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
    args = ["-task", task, "-query", case["query"], "-subject", case[subjects],
            "-outfmt", COLUMNS]
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
