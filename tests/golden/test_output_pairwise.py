"""-outfmt 0 (pairwise): the whole report equals blastn 2.12's but for the database's
posted date (each tool's build time), Biopython reads the same records from both, and the
report's options resolve as blastn resolves them."""

import io
import os

import pytest

from golden import needs_blast, option_flags
from report_golden import blastn_output, example_data, gblastn_output

from gblastn.errors import OptionsError
from gblastn.output.formats import ReportLimits, report_limits
from gblastn.output.pairwise import evalue_text, percent, posted_date, wrap, wrap_title


def test_wrap_as_ncbi_wraps():
    text = ('Reference: Zheng Zhang, Scott Schwartz, Lukas Wagner, and Webb Miller (2000), '
            '"A greedy algorithm for aligning DNA sequences", J Comput Biol 2000; '
            '7(1-2):203-14.')
    assert wrap(text, 68) == [
        "Reference: Zheng Zhang, Scott Schwartz, Lukas Wagner, and Webb",
        'Miller (2000), "A greedy algorithm for aligning DNA sequences", J',
        "Comput Biol 2000; 7(1-2):203-14."]
    assert wrap("x" * 70, 68) == ["x" * 68, "xx"]
    assert wrap("", 68) == []


def test_title_wrap_and_numbers():
    title = "CP003200.1:1-300000 Klebsiella pneumoniae subsp. pneumoniae HS11286 chromosome"
    assert wrap_title(title) == ("CP003200.1:1-300000 Klebsiella pneumoniae subsp. pneumoniae "
                                 "HS11286 \nchromosome")
    assert [evalue_text(e) for e in (0.0, 1e-120, 3.2e-5, 0.042, 0.42, 5.2, 12.0)] == \
        ["0.0", "1e-120", "3e-05", "0.042", "0.42", "5.2", "12"]
    assert (percent(500, 500), percent(999, 1000), percent(2, 27)) == (100, 99, 7)
    assert posted_date("Nov 26, 2026  03:43 PM") == "Nov 26, 2026  3:43 PM"


def test_report_limits_as_blastn_resolves_them():
    warnings = []
    assert report_limits("0") == ReportLimits(None, None, None)
    assert report_limits("0", num_descriptions=10) == ReportLimits(250, 10, 250)
    assert report_limits("0", max_target_seqs=7) == ReportLimits(7, 7, 7)
    assert report_limits("6", num_alignments=8, num_descriptions=2,
                         warn=warnings.append) == ReportLimits(8, None, None)
    assert "-num_descriptions is ignored" in warnings[0]
    with pytest.raises(OptionsError, match="-num_alignments cannot be given with"):
        report_limits("0", max_target_seqs=3, num_alignments=2)
    with pytest.raises(OptionsError, match="No hits are being saved"):
        report_limits("0", num_descriptions=0, num_alignments=0)
    with pytest.raises(OptionsError, match="-line_length must be at least 1"):
        report_limits("0", line_length=0)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return example_data(tmp_path_factory.mktemp("pairwise"))


CASES = {
    "small": ("example", "small", {}),
    "multi_with_no_hits": ("example", "multi", {}),
    "no_hits": ("example", "nohit", {}),
    "query_without_letters": ("example", "empty", {}),
    "many_subjects": ("generated", "generated", {}),
    "line_length_37": ("generated", "generated", {"line_length": 37}),
    "descriptions_only": ("generated", "generated", {"num_descriptions": 1,
                                                     "num_alignments": 0}),
    "alignments_only": ("generated", "generated", {"num_descriptions": 0}),
    "one_target": ("generated", "generated", {"max_target_seqs": 1}),
    "show_gis_masks_minus_strand": ("generated", "generated",
                                    {"show_gis": True, "lcase_masking": True,
                                     "strand": "minus"}),
}
NO_HITS = ("no_hits", "query_without_letters")


def _without_date(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith("    Posted date:"))


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("task", ["megablast", "blastn"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_pairwise_equals_blastn(data, task, name):
    db, query, options = CASES[name]
    expected = blastn_output(data["queries"][query], data[db], task, "0", *option_flags(options))
    assert "Query= " in expected and "Posted date:" in expected
    if name not in NO_HITS:  # else equal reports could both have lost every hit
        assert "Sequences producing significant alignments" in expected or \
            "Score = " in expected
    got = gblastn_output(data, data["queries"][query], data[db], task, "0", **options)
    assert _without_date(got) == _without_date(expected)


@needs_blast
@pytest.mark.golden
def test_show_gis_keeps_the_space_blastn_drops(tmp_path, data):
    """blastn 2.12 -show_gis writes a local id against its title in the descriptions
    ('local3third'); gblastn keeps the space between them."""
    import subprocess

    from golden import write_fasta
    from gblastn.db.writer import make_db

    with open(data["queries"]["nohit"]) as handle:
        sequence = "".join(handle.read().splitlines()[1:])
    fasta = write_fasta(tmp_path / "ids.fa", [("gi|12345|gb|AB000001.2| first", sequence),
                                             ("lcl|local3 third", sequence)])
    db = str(tmp_path / "ids")
    subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-parse_seqids",
                    "-out", db], check=True, capture_output=True)
    make_db([fasta], db, parse_seqids=True, progress=False)
    query = data["queries"]["nohit"]
    expected = blastn_output(query, db, "megablast", "0", "-show_gis")
    got = gblastn_output(data, query, db, "megablast", "0", show_gis=True)
    assert "local3third" in expected
    assert _without_date(got) == _without_date(expected).replace("local3third ", "local3 third")


@needs_blast
@pytest.mark.golden
def test_biopython_reads_the_same_records(data):
    """Where Biopython still reads BLAST's text (SearchIO 'blast-text', gone from recent
    releases)."""
    from Bio import SearchIO

    if "blast-text" not in SearchIO._ITERATOR_MAP:
        pytest.skip("this Biopython has no reader of BLAST's pairwise text")
    query, db = data["queries"]["generated"], data["generated"]
    expected = blastn_output(query, db, "blastn", "0")
    got = gblastn_output(data, query, db, "blastn", "0")
    parsed = _searchio(SearchIO, got)
    assert parsed == _searchio(SearchIO, expected)
    assert sum(len(hsps) for _, hsps in parsed) > 10


def _searchio(SearchIO, text):
    return [(result.id, result.description, result.seq_len,
             [(hit.id, hit.description, hit.seq_len, hsp.bitscore, hsp.bitscore_raw,
               hsp.evalue, hsp.ident_num, hsp.gap_num, hsp.query_range, hsp.hit_range,
               hsp.query_strand, hsp.hit_strand, str(hsp.query.seq), str(hsp.hit.seq))
              for hit in result for hsp in hit])
            for result in SearchIO.parse(io.StringIO(text), "blast-text")]
