"""Golden tests: gblastn search output equals real `blastn` 2.12 output line for line."""

import pytest

from golden import assert_blastn_found_hits, blastn, compare_lines, flags, gblastn, \
    golden_databases, megablast_case, needs_blast, run_ours

pytestmark = [pytest.mark.golden, needs_blast]

COLUMNS = "6 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore score sstrand"


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    return golden_databases(tmp_path_factory.mktemp("megablast"), megablast_case)


MEGABLAST_CASES = {
    "default": ("small", COLUMNS, {}),
    "big_query_12_letter_table": ("big", COLUMNS, {}),
    "outfmt7_custom_columns": ("small", "7 qaccver saccver qlen slen pident nident gaps qcovs qcovhsp "
                               "evalue bitscore btop", {}),
    "max_target_seqs": ("small", COLUMNS, {"max_target_seqs": 2}),
    "max_hsps": ("small", COLUMNS, {"max_hsps": 1}),
    "evalue": ("small", COLUMNS, {"evalue": 1e-30}),
    "strand_plus": ("small", COLUMNS, {"strand": "plus"}),
    "no_dust": ("small", COLUMNS, {"dust": "no"}),
    "lcase_masking": ("small", COLUMNS, {"lcase_masking": True}),
    "perc_identity": ("small", COLUMNS, {"perc_identity": 97}),
    "word_size_16": ("small", COLUMNS, {"word_size": 16}),
}


@pytest.mark.parametrize("name", sorted(MEGABLAST_CASES))
def test_megablast_matches_blastn(case, name):
    which, outfmt, extra = MEGABLAST_CASES[name]
    query = case["queries"][which]
    expected = blastn(query, case["blast_db"], "-task", "megablast", "-outfmt", outfmt, *flags(extra))
    got = run_ours(case, query, "megablast", outfmt, extra)
    assert_blastn_found_hits(expected)
    assert not compare_lines(expected, got), compare_lines(expected, got)


def test_cli_search_matches_blastn(case, tmp_path):
    query = case["queries"]["small"]
    expected = blastn(query, case["blast_db"], "-outfmt", "7")
    assert_blastn_found_hits(expected)
    out = tmp_path / "cli.out"
    done = gblastn("search", "-db", case["our_db"], "-query", query, "-outfmt", "7", "-out", str(out))
    assert done.returncode == 0, done.stderr
    got = out.read_text().splitlines()
    # the '# Database:' line names the database as given, which differs between the two tools
    expected = [line for line in expected if not line.startswith("# Database:")]
    got = [line for line in got if not line.startswith("# Database:")]
    assert not compare_lines(expected, got), compare_lines(expected, got)
