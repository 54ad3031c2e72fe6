"""The Python API's Biopython objects equal those Biopython reads from blastn 2.12's own
XML (-outfmt 5) of the same search: result.to_searchio() as Bio.SearchIO's blast-xml reads
it, hsp.to_alignment() as Bio.Blast.parse gives the HSPs."""

import io
import os
import subprocess

import pytest

from golden import makeblastdb, needs_blast
from report_golden import EXAMPLE_DB, QUERIES

SMALL_QUERIES = os.path.join(QUERIES, "kp1084_small.fa")


@pytest.fixture(scope="module")
def databases(tmp_path_factory):
    """The example database as each tool builds it, under one name."""
    from gblastn.db.writer import make_db

    name = str(tmp_path_factory.mktemp("api_bio") / "example")
    makeblastdb(EXAMPLE_DB, name)
    make_db([EXAMPLE_DB], name, progress=False)
    return name


def _blastn_xml(db: str, task: str) -> str:
    return subprocess.run(["blastn", "-task", task, "-query", SMALL_QUERIES, "-db", db,
                           "-outfmt", "5"], check=True, capture_output=True, text=True).stdout


def _searchio_view(query_result) -> tuple:
    return (query_result.id, query_result.description, query_result.seq_len,
            [(hit.id, hit.description, hit.accession, hit.seq_len,
              [(hsp.bitscore, hsp.bitscore_raw, hsp.evalue, hsp.ident_num, hsp.gap_num,
                hsp.query_range, hsp.hit_range, hsp.query_strand, hsp.hit_strand,
                str(hsp.query.seq), str(hsp.hit.seq), hsp.aln_annotation["similarity"])
               for hsp in hit])
             for hit in query_result])


def _alignment_view(alignment) -> tuple:
    return (alignment.coordinates.tolist(), alignment[0], alignment[1], alignment.score,
            alignment.annotations["identity"], alignment.annotations["gaps"],
            alignment.annotations["midline"], len(alignment.sequences[0].seq),
            len(alignment.sequences[1].seq))


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_to_searchio_and_to_alignment_equal_biopythons_reading_of_blastns_xml(databases,
                                                                               task):
    from Bio import Blast, SearchIO, SeqIO

    import gblastn

    xml = _blastn_xml(databases, task)
    results = gblastn.search(SeqIO.parse(SMALL_QUERIES, "fasta"), databases, task=task)
    expected = list(SearchIO.parse(io.StringIO(xml), "blast-xml"))
    assert sum(len(query) for query in expected) > 0
    assert [_searchio_view(r.to_searchio()) for r in results] == \
        [_searchio_view(query) for query in expected]
    got_alignments = [[_alignment_view(hsp.to_alignment()) for hsp in result.hsps]
                      for result in results]
    blast_alignments = [[_alignment_view(hsp) for hit in record for hsp in hit]
                        for record in Blast.parse(io.BytesIO(xml.encode()))]
    assert got_alignments == blast_alignments
