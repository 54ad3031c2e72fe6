"""Golden tests of a subject longer than one of blastn's chunks: the HSPs of successive chunks
are merged where the chunks overlap, as blastn 2.12 merges them."""

import os

import numpy as np
import pytest

from golden import assert_blastn_found_hits, blastn, compare_lines, golden_databases, mutate, \
    needs_blast, random_dna, run_ours, write_fasta
from gblastn.engine import DBSEQ_CHUNK_OVERLAP, MAX_DBSEQ_LEN

pytestmark = [pytest.mark.golden, needs_blast]

COLUMNS = "6 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore " \
    "score"

# the second chunk starts here, inside the first one's last DBSEQ_CHUNK_OVERLAP letters
SECOND_CHUNK_START = MAX_DBSEQ_LEN - DBSEQ_CHUNK_OVERLAP


def repeat_across_chunks_case(folder, seed: int = 3):
    """A subject a little longer than one chunk, with a (CA)n repeat across the strip where
    its two chunks overlap, and a query: a mutated copy of the subject around the repeat.
    Each chunk finds the repeat's copies shifted by a few letters, on nearby diagonals, and
    the merge of the two chunks' HSPs decides which of them are reported."""
    rng = np.random.default_rng(seed)
    subject = random_dna(rng, MAX_DBSEQ_LEN + 10_000)
    repeat_start = SECOND_CHUNK_START - 50
    repeat = np.frombuffer(b"CA" * 180, dtype=np.uint8)
    subject[repeat_start:repeat_start + repeat.size] = repeat
    query = mutate(rng, subject[repeat_start - 850:repeat_start + 1650], 0.02)
    db_fasta = write_fasta(os.path.join(folder, "db.fa"), [("long", subject)])
    return db_fasta, {"repeat": write_fasta(os.path.join(folder, "q.fa"), [("q", query)])}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    return golden_databases(tmp_path_factory.mktemp("long_subject"), repeat_across_chunks_case)


@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_repeat_across_chunk_overlap_matches_blastn(case, task):
    """The repeat's HSPs from either chunk merge across diagonals (a gapped search's rule);
    dust left off, since it would mask the repeat in the query."""
    query = case["queries"]["repeat"]
    expected = blastn(query, case["blast_db"], "-task", task, "-outfmt", COLUMNS, "-dust", "no")
    got = run_ours(case, query, task, COLUMNS, {"dust": "no"})
    assert_blastn_found_hits(expected)
    assert len(expected) > 3, "the repeat gave blastn no HSPs of its own"
    assert not compare_lines(expected, got), compare_lines(expected, got)


@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_an_ungapped_search_merges_chunks_on_one_diagonal(case, task):
    """-ungapped: blastn merges the chunks' HSPs on one diagonal only (allow_gap false)."""
    query = case["queries"]["repeat"]
    expected = blastn(query, case["blast_db"], "-task", task, "-outfmt", COLUMNS, "-dust", "no",
                      "-ungapped")
    got = run_ours(case, query, task, COLUMNS, {"dust": "no", "ungapped": True})
    assert_blastn_found_hits(expected)
    assert not compare_lines(expected, got), compare_lines(expected, got)
