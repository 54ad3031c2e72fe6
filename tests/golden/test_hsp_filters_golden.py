"""Golden tests of blastn's HSP filters: -culling_limit, -best_hit_overhang,
-best_hit_score_edge and -subject_besthit give blastn 2.12's output line for line, alone and
with -max_hsps, -qcov_hsp_perc and -max_target_seqs, which blastn applies after them; and
what blastn refuses of them is refused in its words."""

import subprocess

import numpy as np
import pytest

from golden import assert_blastn_found_hits, compare_lines, gblastn, mutate, needs_blast, \
    random_dna, revcomp, write_fasta
from reliability import assert_one_line_error

pytestmark = [pytest.mark.golden, needs_blast]

TABULAR = "6 std score"


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """Subjects made of pieces of three repeated elements, mutated to different degrees and
    on either strand, and queries holding the elements: each query meets dozens of HSPs
    over the same query ranges, which the filters thin out."""
    folder = tmp_path_factory.mktemp("hsp_filters")
    rng = np.random.default_rng(3)
    elements = [random_dna(rng, n) for n in (500, 300, 800)]
    subjects = []
    for number in range(40):
        parts = []
        for _ in range(int(rng.integers(1, 5))):
            element = elements[int(rng.integers(0, 3))]
            start = int(rng.integers(0, len(element) // 2))
            piece = mutate(rng, element[start:int(rng.integers(start + 60, len(element) + 1))],
                           float(rng.uniform(0.01, 0.2)), 0.01)
            parts += [random_dna(rng, int(rng.integers(50, 400))),
                      revcomp(piece) if rng.random() < 0.4 else piece]
        subjects.append((f"s{number} subject {number}", np.concatenate(parts)))
    fasta = write_fasta(folder / "db.fa", subjects)
    query = write_fasta(folder / "q.fa", [
        ("q1 the elements", np.concatenate([random_dna(rng, 200), elements[0],
                                            random_dna(rng, 100), elements[1],
                                            revcomp(elements[2]), random_dna(rng, 100)])),
        ("q2 part of one", elements[2][100:600]),
        ("q3 two halves", np.concatenate([elements[1][50:250], elements[0][:300]]))])
    subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-out",
                    str(folder / "blastdb")], check=True, capture_output=True)
    done = gblastn("makedb", "-in", fasta, "-out", str(folder / "ours"), "-quiet")
    assert done.returncode == 0, done.stderr
    return {"folder": folder, "query": query, "blast_db": str(folder / "blastdb"),
            "our_db": str(folder / "ours"), "unfiltered": {}}


def _blastn(case, *args: str) -> list:
    done = subprocess.run(["blastn", "-query", case["query"], "-db", case["blast_db"], *args],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _same_as_blastn(case, task: str, outfmt: str, *args: str, ours_only=()) -> list:
    """blastn's lines, checked equal to gblastn's for the same search (`ours_only`: gblastn's
    flags of its own)."""
    theirs = _blastn(case, "-task", task, "-outfmt", outfmt, *args)
    ours = gblastn("search", "-query", case["query"], "-db", case["our_db"], "-device", "cpu",
                   "-task", task, "-outfmt", outfmt, *args, *ours_only)
    assert ours.returncode == 0, ours.stderr
    got = [line.replace(case["our_db"], case["blast_db"]) for line in ours.stdout.splitlines()]
    assert theirs == got, compare_lines(theirs, got)
    return theirs


def _unfiltered(case, task: str) -> list:
    if task not in case["unfiltered"]:
        case["unfiltered"][task] = _blastn(case, "-task", task, "-outfmt", TABULAR)
    return case["unfiltered"][task]


FILTERED = [
    ("megablast", ["-culling_limit", "1"]),
    ("megablast", ["-culling_limit", "3", "-max_hsps", "1"]),
    ("megablast", ["-best_hit_overhang", "0.1"]),
    ("megablast", ["-best_hit_score_edge", "0.3", "-best_hit_overhang", "0.45",
                   "-qcov_hsp_perc", "30"]),
    ("megablast", ["-subject_besthit"]),
    ("blastn", ["-culling_limit", "2"]),
    ("blastn", ["-culling_limit", "25"]),  # leaves of over 20 HSPs split in two
    ("blastn", ["-best_hit_score_edge", "0.2", "-max_target_seqs", "5"]),
    ("blastn", ["-subject_besthit", "-culling_limit", "2"]),
    ("blastn", ["-subject_besthit"]),
    # the best-hit filter with hit lists of a few subjects
    ("blastn", ["-best_hit_overhang", "0.25", "-max_target_seqs", "1"]),
    ("blastn", ["-best_hit_score_edge", "0.05", "-max_target_seqs", "3", "-word_size", "7"]),
    ("megablast", ["-best_hit_overhang", "0.1", "-max_target_seqs", "2"]),
]


@pytest.mark.parametrize("task,args", FILTERED, ids=lambda value: " ".join(value)
                         if isinstance(value, list) else value)
def test_filtered_hits_as_blastn(case, task, args):
    expected = _same_as_blastn(case, task, TABULAR, *args)
    assert_blastn_found_hits(expected)
    assert expected != _unfiltered(case, task), "the filter changed nothing: a weak case"


def test_the_serial_driver_filters_as_the_pipeline(case):
    _same_as_blastn(case, "blastn", TABULAR, "-culling_limit", "2", "-subject_besthit",
                    ours_only=["-mode", "serial"])


@pytest.mark.parametrize("outfmt,args", [("0", ["-culling_limit", "3"]),
                                         ("5", ["-best_hit_overhang", "0.2"])])
def test_filtered_reports_as_blastn(case, outfmt, args):
    """The pairwise report and the XML list the filtered subjects and HSPs."""
    _same_as_blastn(case, "blastn", outfmt, *args)


REFUSED = [
    (["-culling_limit", "-1"], 'Argument "culling_limit". Illegal value, expected >=0:  `-1\''),
    (["-best_hit_overhang", "0.5"],
     'Argument "best_hit_overhang". Illegal value, expected (>0 and <0.5):  `0.5\''),
    (["-best_hit_score_edge", "0"],
     'Argument "best_hit_score_edge". Illegal value, expected (>0 and <0.5):  `0\''),
    (["-culling_limit", "2", "-best_hit_overhang", "0.1"],
     'Argument "culling_limit". Incompatible with argument:  `best_hit_overhang\''),
    (["-best_hit_score_edge", "0.1", "-culling_limit", "0"],
     'Argument "culling_limit". Incompatible with argument:  `best_hit_score_edge\''),
]


@pytest.mark.parametrize("args,message", REFUSED, ids=lambda value: " ".join(value)
                         if isinstance(value, list) else None)
def test_what_blastn_refuses_is_refused_in_its_words(case, args, message):
    out = case["folder"] / "refused.out"
    done = gblastn("search", "-query", case["query"], "-db", case["our_db"], "-device", "cpu",
                   "-out", str(out), *args)
    assert assert_one_line_error(done, 2) == f"gblastn: error: {message}"
    assert not out.exists()
    theirs = subprocess.run(["blastn", "-query", case["query"], "-db", case["blast_db"], *args],
                            capture_output=True, text=True)
    assert theirs.returncode != 0 and message in theirs.stderr


def test_the_api_takes_the_filters(case):
    """gblastn.search takes the filters as keywords, with the command line's results."""
    import gblastn

    expected = _blastn(case, "-task", "blastn", "-outfmt", "6 qseqid sseqid qstart qend "
                       "sstart send score", "-culling_limit", "2")
    results = gblastn.search(case["query"], case["our_db"], columns="qseqid sseqid qstart "
                             "qend sstart send score", task="blastn", culling_limit=2)
    got = ["\t".join(str(record[column]) for column in ("qseqid", "sseqid", "qstart", "qend",
                                                          "sstart", "send", "score"))
           for result in results for record in result.records]
    assert_blastn_found_hits(expected)
    assert got == expected, compare_lines(expected, got)
