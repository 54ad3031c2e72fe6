"""-outfmt 17 (SAM), with its words SQ and SR: the whole file equals blastn 2.12's but for the
@PG line (the program, its version and command line), and Biopython reads the same
alignments from both."""

import os

import numpy as np
import pytest

from golden import needs_blast, option_flags
from report_golden import NO_HITS, REPORT_CASES, blastn_output, example_data, gblastn_output

from gblastn.options import make_options
from gblastn.output.alignments import ShownHsp
from gblastn.output.formats import output_format
from gblastn.output.sam import SamReport, _cigar, _clips, _percent_identity


def _hsp(query_row: str, subject_row: str) -> ShownHsp:
    return ShownHsp(10, 20.5, 1e-5, 1, 9, 1, 9, False, query_row, subject_row)


def test_cigar_clips_and_identity():
    types = np.frombuffer(b"MMMIIMMDM", dtype=np.uint8)
    assert _cigar(types) == "3M2I2M1D1M"
    assert _clips(10, 40, 50, reverse=False) == ("10H", "10H")
    assert _clips(0, 40, 50, reverse=True) == ("10H", "")
    assert _percent_identity(_hsp("ACGT-A", "ACGTTA")) == "100.00"
    assert _percent_identity(_hsp("A" * 10000, "A" * 9999 + "C")) == "99.99"
    assert _percent_identity(_hsp("ACGTAC-A", "ACGAACTA")) == "85.71"


def test_outfmt_17_words():
    options = make_options("megablast")
    report = output_format("17 SR  SQ", options, "db", "gblastn search ")
    assert isinstance(report, SamReport)
    assert report.subject_is_reference and report.with_sequences
    plain = output_format("17 sq sr", options, "db")  # blastn's words are upper case
    assert not plain.subject_is_reference and not plain.with_sequences
    assert report._program_line().endswith("\tCL:gblastn search \tPN:gblastn")
    assert "\tCL:" not in plain._program_line()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return example_data(tmp_path_factory.mktemp("sam"))


CASES = REPORT_CASES
WORDS = ["", "SQ", "SR", "SR SQ"]


def _without_program_line(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith("@PG\t"))


def _outputs(data, name, task, words):
    db, query, options = CASES[name]
    outfmt = f"17 {words}".strip()
    expected = blastn_output(data["queries"][query], data[db], task, outfmt,
                             *option_flags(options))
    got = gblastn_output(data, data["queries"][query], data[db], task, outfmt, **options)
    return expected, got


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("words", WORDS)
@pytest.mark.parametrize("task", ["megablast", "blastn"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_sam_equals_blastn(data, name, task, words):
    expected, got = _outputs(data, name, task, words)
    if name not in NO_HITS:  # else equal files could both have lost every hit
        assert "\tAS:i:" in expected
    if name == "no_hits" and task == "megablast":
        assert expected == ""  # without a hit blastn writes nothing, not even a header
    if expected:
        assert got.startswith("@HD\tVN:1.2\t")
        assert sum(line.startswith("@PG\t") for line in got.splitlines()) == 1
    assert _without_program_line(got) == _without_program_line(expected)


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("words", WORDS)
def test_biopython_reads_the_same_alignments(data, tmp_path, words):
    from Bio import Align

    expected, got = _outputs(data, "many_subjects", "blastn", words)
    records = []
    for name, text in (("blastn.sam", expected), ("gblastn.sam", got)):
        path = os.path.join(tmp_path, name)
        with open(path, "w") as handle:
            handle.write(text)
        records.append([_alignment(alignment) for alignment in Align.parse(path, "sam")])
    assert records[0] == records[1]
    assert len(records[1]) > 1


def _alignment(alignment):
    query = alignment.query
    letters = bytes(query.seq) if query.seq.defined else None
    return (alignment.target.id, len(alignment.target), query.id, alignment.flag,
            alignment.coordinates.tolist(), alignment.score, alignment.annotations, letters)
