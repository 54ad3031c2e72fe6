"""Golden tests of -window_masker_db: the queries are masked with WindowMasker from a unit
counts file of `windowmasker -mk_counts` (obinary or binary, the formats blastn 2.12 reads),
and its masks replace DUST's and lower case's, as blastn's do: the same masked intervals as
`windowmasker -outfmt interval`, the same hits and reports for every task, soft and hard
masking, and blastn's refusals of files it cannot read."""

import json
import shutil
import subprocess

import numpy as np
import pytest

from golden import (assert_blastn_found_hits, gblastn, hit_lines, lower, makeblastdb, mutate,
                    needs_blast, random_dna, revcomp, same_as_blastn, sprinkle, write_fasta)

needs_windowmasker = pytest.mark.skipif(shutil.which("windowmasker") is None,
                                        reason="NCBI windowmasker is not installed")
pytestmark = [pytest.mark.golden, needs_blast, needs_windowmasker]

LOW_COMPLEXITY = np.frombuffer(b"CA" * 40 + b"T" * 30, dtype=np.uint8)


def _genome(rng) -> np.ndarray:
    """Unique stretches between mutated copies of three repeat families, either strand."""
    families = [random_dna(rng, n) for n in (400, 220, 90)]
    parts = []
    for _ in range(150):
        parts.append(random_dna(rng, int(rng.integers(100, 900))))
        copy = mutate(rng, families[int(rng.integers(0, 3))], 0.04)
        parts.append(revcomp(copy) if rng.random() < 0.5 else copy)
    return np.concatenate(parts)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    folder = tmp_path_factory.mktemp("window_masker")
    rng = np.random.default_rng(37)
    genome = _genome(rng)
    cuts = np.linspace(0, genome.size, 13).astype(int)
    subjects = [(f"s{n} piece {n}", genome[a:b]) for n, (a, b) in
                enumerate(zip(cuts[:-1], cuts[1:]))]
    fasta = write_fasta(folder / "db.fa", subjects)
    pieces = [genome[s:s + int(rng.integers(1_500, 4_000))]
              for s in rng.integers(0, genome.size - 4_000, 5)]
    queries = [
        ("q0 repeats", mutate(rng, pieces[0], 0.02)),
        ("q1 lower case half", lower(mutate(rng, pieces[1], 0.02), 0, pieces[1].size // 2)),
        ("q2 low complexity inside",
         np.concatenate([pieces[2][:800], LOW_COMPLEXITY, pieces[2][800:]])),
        ("q3 ambiguous letters", sprinkle(rng, pieces[3], n_runs=2, n_iupac=6, run_len=(1, 20))),
        ("q4 minus strand", revcomp(mutate(rng, pieces[4], 0.03))),
    ]
    query = write_fasta(folder / "q.fa", queries)
    counts = {}
    for kind in ("obinary", "binary", "oascii", "ascii"):
        counts[kind] = str(folder / f"counts.{kind}")
        subprocess.run(["windowmasker", "-mk_counts", "-in", fasta, "-out", counts[kind],
                        "-sformat", kind], check=True, capture_output=True)
    return {"folder": folder, "query": query, "db": makeblastdb(fasta, str(folder / "db")),
            "counts": counts}


def _blastn(case, *args) -> str:
    done = subprocess.run(["blastn", "-query", case["query"], "-db", case["db"], *args],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("task", ["megablast", "blastn", "dc-megablast", "blastn-short"])
def test_the_masked_search_as_blastn(case, task):
    """The masks change the hits (fewer seeds in the repeats), and the hits are blastn's."""
    args = ["-task", task, "-outfmt", "7 std qseq sseq"]
    masked = same_as_blastn(case["query"], case["db"], *args, "-window_masker_db",
                            case["counts"]["obinary"])
    assert_blastn_found_hits(masked)
    assert hit_lines(_blastn(case, *args)) != hit_lines(masked)


@pytest.mark.parametrize("args", [["-lcase_masking"], ["-dust", "no"],
                                  ["-dust", "no", "-lcase_masking"], ["-soft_masking", "false"],
                                  ["-soft_masking", "false", "-lcase_masking"],
                                  ["-strand", "minus"], ["-query_loc", "301-2200"],
                                  ["-num_threads", "2"]])
def test_other_masking_options_as_blastn(case, args):
    """DUST's and lower case's masks are replaced by WindowMasker's, under soft and hard
    masking, on the letters -query_loc searches."""
    lines = same_as_blastn(case["query"], case["db"], "-task", "blastn", "-outfmt",
                           "6 std qseq", "-window_masker_db", case["counts"]["obinary"], *args)
    assert_blastn_found_hits(lines)


def test_lower_case_and_dust_masks_are_replaced_as_in_blastn(case):
    """Without WindowMasker, lower case and DUST mask letters it does not mask: the
    masked search's hits differ from those of DUST and lower case alone."""
    args = ["-task", "blastn", "-lcase_masking", "-outfmt", "6 std qseq"]
    masked = _blastn(case, *args, "-window_masker_db", case["counts"]["obinary"])
    assert hit_lines(_blastn(case, *args)) != hit_lines(masked)


def test_the_python_api_takes_the_counts_file(case):
    """As a keyword, a path or a string: blastn's HSPs."""
    from pathlib import Path

    import gblastn

    counts = case["counts"]["obinary"]
    theirs = hit_lines(_blastn(case, "-task", "blastn", "-outfmt", "6 qseqid sseqid qstart "
                               "qend sstart send", "-window_masker_db", counts))
    results = gblastn.search(case["query"], case["db"], columns="qseqid sseqid qstart qend "
                             "sstart send", task="blastn", window_masker_db=Path(counts))
    ours = ["\t".join(str(value) for value in hsp.fields.values())
            for result in results for hsp in result.hsps]
    assert ours == theirs and theirs


def test_a_binary_counts_file_as_blastn(case):
    lines = same_as_blastn(case["query"], case["db"], "-outfmt", "7 std",
                           "-window_masker_db", case["counts"]["binary"])
    assert_blastn_found_hits(lines)


@pytest.mark.parametrize("outfmt", ["0", "5", "15"])
def test_the_reports_as_blastn(case, outfmt):
    """The pairwise report's lower-case query letters, the XML and JSON filter string
    ('L;W -d FILE;m;') and JSON's query_masking."""
    lines = same_as_blastn(case["query"], case["db"], "-outfmt", outfmt, "-max_target_seqs",
                           "3", "-window_masker_db", case["counts"]["obinary"])
    if outfmt == "15":
        report = json.loads("\n".join(lines))["BlastOutput2"][0]["report"]
        assert report["params"]["filter"] == f"L;W -d {case['counts']['obinary']};m;"
        assert report["results"]["search"]["query_masking"]


def test_the_masked_intervals_are_windowmaskers(case):
    """gblastn's intervals of each query are those `windowmasker -outfmt interval` prints."""
    from gblastn.query import read_queries
    from gblastn.window_masker import unit_counts, window_masker_intervals_many

    for kind in ("obinary", "binary"):
        theirs = subprocess.run(["windowmasker", "-ustat", case["counts"][kind], "-in",
                                 case["query"], "-outfmt", "interval"], capture_output=True,
                                text=True, check=True).stdout
        expected = []
        for line in theirs.splitlines():
            if line.startswith(">"):
                expected.append([])
            else:
                first, last = line.split(" - ")
                expected[-1].append((int(first), int(last)))
        queries = read_queries(case["query"])
        found = window_masker_intervals_many([q.codes for q in queries],
                                             unit_counts(case["counts"][kind]))
        assert [[tuple(row) for row in f.tolist()] for f in found] == expected
        assert sum(map(len, expected)) > 10


def _refusal(case, counts: str):
    args = ["-query", case["query"], "-db", case["db"], "-outfmt", "6",
            "-window_masker_db", counts]
    theirs = subprocess.run(["blastn", *args], capture_output=True, text=True)
    ours = gblastn("search", *args, "-device", "cpu", "-out", str(case["folder"] / "out"))
    assert theirs.returncode != 0 and ours.returncode == 2
    assert ours.stderr.count("\n") == 1 and "Traceback" not in ours.stderr
    assert not (case["folder"] / "out").exists()
    return theirs.stderr, ours.stderr


@pytest.mark.parametrize("kind", ["oascii", "ascii"])
def test_text_counts_are_refused_as_by_blastn(case, kind):
    theirs, ours = _refusal(case, case["counts"][kind])
    message = "Only optimized binary windowmasker stat files are supported"
    assert message in theirs and ours == f"gblastn: error: {message}\n"


def test_a_missing_file_is_refused_as_by_blastn(case):
    missing = str(case["folder"] / "missing.obinary")
    theirs, ours = _refusal(case, missing)
    assert f"could not open {missing}" in theirs
    assert ours == f"gblastn: error: could not open {missing}\n"


@pytest.mark.parametrize("length, reason", [(1_000, "not enough data to fill the hash table"),
                                            (-2, "not enough data to fill the values table")])
def test_a_truncated_file_is_refused_as_by_blastn(case, length, reason):
    with open(case["counts"]["obinary"], "rb") as handle:
        data = handle.read()
    cut = case["folder"] / f"cut{length}.obinary"
    cut.write_bytes(data[:length])
    theirs, ours = _refusal(case, str(cut))
    assert reason in theirs and reason in ours


def test_window_masker_taxid_is_refused(case):
    done = gblastn("search", "-query", case["query"], "-db", case["db"],
                   "-window_masker_taxid", "9606")
    assert done.returncode == 2
    assert done.stderr == ("gblastn: error: option -window_masker_taxid is not supported "
                           "by gblastn\n")
