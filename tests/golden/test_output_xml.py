"""-outfmt 5 (BLAST XML): the whole file equals blastn 2.12's byte for byte, and Biopython
reads the same records from both."""

import io

import pytest

from golden import needs_blast, option_flags
from report_golden import NO_HITS, REPORT_CASES, blastn_output, example_data, gblastn_output

from gblastn.output.xml import escape, filter_string, six_digits
from gblastn.options import make_options


def test_escape_and_numbers():
    assert escape("a<b>&'\"\x01") == "a&lt;b&gt;&amp;&apos;&quot;&#x1;"
    assert six_digits(924.44541234) == "924.445"
    assert six_digits(1.2345678e-45) == "1.23457e-45"
    assert six_digits(0.0) == "0"


@pytest.mark.parametrize("overrides,text", [
    ({}, "L;m;"), ({"dust": "no"}, "m;"), ({"soft_masking": False}, "L;"),
    ({"dust": "no", "soft_masking": False}, "F"), ({"dust": "30 64 1"}, "D 30 64 1;m;"),
    # blastn names the values given, though DUST falls back from those out of its range
    ({"dust": "20 128 1"}, "D 20 128 1;m;"), ({"dust": "30 128 4"}, "D 30 128 4;m;"),
    ({"dust": "20 64 1"}, "L;m;"),
    ({"window_masker_db": "wm.obinary"}, "L;W -d wm.obinary;m;"),
    ({"window_masker_db": "wm", "dust": "no", "soft_masking": False}, "W -d wm;"),
])
def test_filter_string(overrides, text):
    assert filter_string(make_options("blastn", **overrides)) == text


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return example_data(tmp_path_factory.mktemp("xml"))


CASES = REPORT_CASES


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("task", ["megablast", "blastn"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_xml_equals_blastn(data, task, name):
    db, query, options = CASES[name]
    expected = blastn_output(data["queries"][query], data[db], task, "5", *option_flags(options))
    assert expected.count("<Iteration>") >= 1
    if name not in NO_HITS:  # else equal files could both have lost every hit
        assert "<Hit>" in expected
    got = gblastn_output(data, data["queries"][query], data[db], task, "5", **options)
    assert got == expected


@needs_blast
@pytest.mark.golden
def test_biopython_reads_the_same_records(data):
    from Bio import Blast, SearchIO
    from Bio.Blast import NCBIXML

    query, db = data["queries"]["generated"], data["generated"]
    expected = blastn_output(query, db, "blastn", "5")
    got = gblastn_output(data, query, db, "blastn", "5")
    assert _ncbixml(NCBIXML, expected) == _ncbixml(NCBIXML, got)
    assert _blast_parse(Blast, expected) == _blast_parse(Blast, got)
    assert _searchio(SearchIO, expected) == _searchio(SearchIO, got)
    assert any(hsps for _, hsps in _searchio(SearchIO, got))


def _ncbixml(NCBIXML, text):
    return [(record.query, record.query_length,
             [(alignment.hit_id, alignment.hit_def, alignment.length,
               [(hsp.score, hsp.bits, hsp.expect, hsp.query_start, hsp.query_end,
                 hsp.sbjct_start, hsp.sbjct_end, hsp.identities, hsp.gaps, hsp.query,
                 hsp.sbjct, hsp.match) for hsp in alignment.hsps])
              for alignment in record.alignments])
            for record in NCBIXML.parse(io.StringIO(text))]


def _blast_parse(Blast, text):
    records = Blast.parse(io.BytesIO(text.encode()))
    return [(record.query.id, record.query.description, len(record.query),
             [(hit.target.id, hit.target.description,
               [(hsp.score, hsp.annotations["bit score"], hsp.annotations["evalue"],
                 hsp.coordinates.tolist(), hsp[0], hsp[1])
                for hsp in hit])
              for hit in record])
            for record in records]


def _searchio(SearchIO, text):
    return [(query.id, [(hit.id, hsp.bitscore, hsp.evalue, hsp.query_range, hsp.hit_range,
                         hsp.hit_strand, str(hsp.query.seq), str(hsp.hit.seq))
                        for hit in query for hsp in hit])
            for query in SearchIO.parse(io.StringIO(text), "blast-xml")]


@needs_blast
@pytest.mark.golden
def test_query_titles_with_runs_of_spaces_as_blastn(data, tmp_path):
    """The XML report gives a query's defline with each run of spaces made one."""
    with open(data["queries"]["small"]) as handle:
        letters = handle.read().split("\n", 1)[1].split(">")[0]
    query = tmp_path / "spaced.fa"
    query.write_text("".join(f">{defline}\n{letters}" for defline in
                             ("  myid   two   words  ", "lcl|xx   t  t", "onlyid   ")))
    expected = blastn_output(str(query), data["example"], "megablast", "5")
    assert "<Iteration_query-def>myid two words</Iteration_query-def>" in expected
    assert gblastn_output(data, str(query), data["example"], "megablast", "5") == expected
