"""Golden tests of -max_hsps and -qcov_hsp_perc against blastn 2.12: both apply after the
subjects are ranked and cut to -max_target_seqs, so a subject keeps the rank of its best
E-value from before them, a subject they empty still took its place in the hit list, and
max_hsps keeps the first HSPs in score order, or in E-value order once blastn's hit list
held more subjects than it keeps."""

import numpy as np
import pytest

from golden import assert_blastn_found_hits, makeblastdb, needs_blast, random_dna, revcomp, \
    same_as_blastn, write_fasta

pytestmark = [pytest.mark.golden, needs_blast]


def _padded(rng, pieces: list, length: int = 1200) -> np.ndarray:
    """Random letters with each (position, letters) of `pieces` written in."""
    subject = random_dna(rng, length)
    for position, letters in pieces:
        subject[position:position + letters.size] = letters
    return subject


@pytest.fixture(scope="module")
def coverage_case(tmp_path_factory):
    """A query whose best subject (A: 110 letters identical) covers a third of it, and a
    weaker subject (B: 130 letters, one in twelve changed) covering 43 %."""
    folder = tmp_path_factory.mktemp("hsp_limits_coverage")
    rng = np.random.default_rng(5)
    query = random_dna(rng, 300)
    weaker = query[150:280].copy()
    weaker[6::12] = np.frombuffer(b"ACGT", dtype=np.uint8)[
        (np.searchsorted(np.frombuffer(b"ACGT", dtype=np.uint8), weaker[6::12]) + 1) % 4]
    fasta = write_fasta(folder / "db.fa", [("A", _padded(rng, [(500, query[:110])])),
                                           ("B", _padded(rng, [(400, weaker)]))])
    return str(write_fasta(folder / "q.fa", [("q", query)])), makeblastdb(fasta,
                                                                          str(folder / "db"))


@pytest.mark.parametrize("max_target_seqs", ["1", "2", "5"])
@pytest.mark.parametrize("coverage", ["40", "30"])
def test_a_subject_the_coverage_test_empties_keeps_its_place(coverage_case, max_target_seqs,
                                                             coverage):
    """With -qcov_hsp_perc 40 and -max_target_seqs 1, blastn shows nothing: A took the one
    place, then failed the test; B is not moved up."""
    query, db = coverage_case
    expected = same_as_blastn(query, db, "-task", "blastn", "-outfmt", "6",
                              "-max_target_seqs", max_target_seqs, "-qcov_hsp_perc", coverage)
    if (max_target_seqs, coverage) != ("1", "40"):
        assert_blastn_found_hits(expected)


@pytest.fixture(scope="module")
def strands_case(tmp_path_factory):
    """Exact copies of 20-letter pieces of one query on either strand of the subjects, each
    between letters that end its alignment: blastn-short's scores tie, and its E-values
    differ between the strands in the last digits (each strand's Karlin block comes from
    its own letter counts). Subjects 1 and 7 hold a piece on each strand, in opposite
    orders along the subject, so that max_hsps 1 keeps the one of larger E-value in one of
    them; subjects 4 and 5 hold two on each strand, likewise, so that score order and
    E-value order keep different pairs."""
    folder = tmp_path_factory.mktemp("hsp_limits_strands")
    rng = np.random.default_rng(11)
    query = random_dna(rng, 300)
    query[:60] = ord("A")  # a composition far from even
    query[:60:3] = ord("C")

    def piece(k, minus=False):
        """Piece k (query letters 60 + 20 k to 80 + 20 k) with a letter either side that
        matches neither the query's next letter nor its complement."""
        start = 60 + 20 * k
        ends = query[[start - 1, start + 20]]
        flank = [next(b for b in b"ACGT" if b not in (e, revcomp(np.array([e]))[0]))
                 for e in ends]
        letters = np.concatenate([[flank[0]], query[start:start + 20], [flank[1]]]).astype(
            np.uint8)
        return revcomp(letters) if minus else letters

    subjects = [
        [(300, piece(0))],
        [(100, piece(1, True)), (700, piece(2))],
        [(200, piece(3, True))],
        [(900, piece(4))],
        [(100, piece(5)), (300, piece(6)), (700, piece(7, True)), (900, piece(8, True))],
        [(100, piece(5, True)), (300, piece(6, True)), (700, piece(7)), (900, piece(8))],
        [(500, query[120:136])],
        [(100, piece(9)), (700, piece(10, True))],
    ]
    fasta = write_fasta(folder / "db.fa", [(f"s{k} subject {k}", _padded(rng, pieces))
                                           for k, pieces in enumerate(subjects)])
    return str(write_fasta(folder / "q.fa", [("q strands", query)])), makeblastdb(
        fasta, str(folder / "db"))


@pytest.mark.parametrize("limits", [
    [],
    ["-max_hsps", "1"],
    ["-max_hsps", "2"],
    ["-max_hsps", "2", "-max_target_seqs", "2"],
    ["-max_hsps", "1", "-max_target_seqs", "3"],
    ["-max_hsps", "3", "-max_target_seqs", "6"],
    ["-max_hsps", "1", "-qcov_hsp_perc", "5"],
], ids=lambda limits: "_".join(limits).replace("-", "") or "none")
@pytest.mark.parametrize("outfmt", ["6 std sstrand", "0"])
def test_max_hsps_ranks_and_cuts_as_blastn(strands_case, limits, outfmt):
    """A subject is ranked by its best E-value before -max_hsps (subject 1 or 7 stays among the
    plus or minus strand's pieces, whichever has the smaller E-value); with more subjects
    than -max_target_seqs the HSPs kept are the first in E-value order."""
    query, db = strands_case
    expected = same_as_blastn(query, db, "-task", "blastn-short", "-outfmt", outfmt, *limits)
    assert_blastn_found_hits(expected if outfmt != "0" else
                             [line for line in expected if line.startswith(">")])
