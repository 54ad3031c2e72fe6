"""Golden tests for `-ungapped`: the ungapped alignments are the HSPs, with the ungapped
Karlin-Altschul statistics. gblastn's reports equal real `blastn` 2.12's line for line, for
every task, on the megablast case's queries (ambiguity codes in the subjects, DUST and
lower-case masks, both strands, repeats), in tabular, pairwise, XML, BlastOutput2 and SAM
form."""

import pytest

from golden import assert_blastn_found_hits, blastn, compare_lines, flags, gblastn, \
    golden_databases, megablast_case, needs_blast, run_ours

pytestmark = [pytest.mark.golden, needs_blast]

COLUMNS = "7 std score"


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    return golden_databases(tmp_path_factory.mktemp("ungapped"), megablast_case)


def assert_same_as_blastn(case, query: str, task: str, extra: dict) -> None:
    """The tabular reports of an ungapped search with these options are blastn's."""
    extra = {"ungapped": True, **extra}
    expected = blastn(query, case["blast_db"], "-task", task, "-outfmt", COLUMNS,
                      *flags(extra))
    got = run_ours(case, query, task, COLUMNS, extra)
    assert_blastn_found_hits(expected)
    assert not compare_lines(expected, got), compare_lines(expected, got)


@pytest.mark.parametrize("task", ["megablast", "blastn", "dc-megablast", "blastn-short"])
def test_every_task_matches_blastn(case, task):
    assert_same_as_blastn(case, case["queries"]["small"], task, {})


@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_a_long_query_matches_blastn(case, task):
    assert_same_as_blastn(case, case["queries"]["big"], task, {})


OPTIONS = {
    "perc_identity": ("megablast", {"perc_identity": 97}),
    "max_hsps": ("blastn", {"max_hsps": 2}),
    "qcov_hsp_perc": ("blastn", {"qcov_hsp_perc": 20}),
    # blastn tests coverage before max_hsps when it aligns without gaps
    "max_hsps_qcov_hsp_perc": ("megablast", {"max_hsps": 2, "qcov_hsp_perc": 10}),
    "max_target_seqs": ("megablast", {"max_target_seqs": 2}),
    "evalue": ("blastn", {"evalue": 1e-30}),
    "strand_minus": ("blastn", {"strand": "minus"}),
    "xdrop_ungap": ("megablast", {"xdrop_ungap": 5}),
    "culling_limit": ("megablast", {"culling_limit": 1}),
    "subject_besthit": ("megablast", {"subject_besthit": True}),
    "lcase_masking": ("blastn", {"lcase_masking": True}),
    # scores and gap costs that no gapped search takes: an ungapped one needs no table
    "untabulated_scores": ("blastn", {"reward": 5, "penalty": -4}),
    "untabulated_gap_costs": ("blastn", {"gapopen": 1, "gapextend": 1}),
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_options_match_blastn(case, name):
    task, extra = OPTIONS[name]
    assert_same_as_blastn(case, case["queries"]["small"], task, extra)


@pytest.mark.parametrize("gapped", [True, False], ids=["gapped", "ungapped"])
@pytest.mark.parametrize("percent", [0.7, 1, 10])
def test_query_coverage_rounds_as_blastn(case, gapped, percent):
    """-qcov_hsp_perc keeps an HSP whose coverage plus half a percent (below 99 %) reaches
    it (Blast_HSPGetQueryCoverage): HSPs of 0.6 % and 9.8 % of their query lie on the
    edge."""
    extra = {"qcov_hsp_perc": percent}
    query = case["queries"]["small"]
    expected = blastn(query, case["blast_db"], "-task", "blastn", "-outfmt", COLUMNS,
                      *flags(extra), *([] if gapped else ["-ungapped"]))
    got = run_ours(case, query, "blastn", COLUMNS, {**extra, "ungapped": not gapped})
    assert_blastn_found_hits(expected)
    assert not compare_lines(expected, got), compare_lines(expected, got)


@pytest.mark.parametrize("task", ["megablast", "blastn"])
@pytest.mark.parametrize("outfmt", ["0", "5", "16"])
def test_reports_match_blastn(case, task, outfmt):
    """The pairwise footer has no gapped block and no gap penalties, XML's statistics are
    the ungapped block's, BlastOutput2 lists no gap costs."""
    query = case["queries"]["small"]
    extra = {"ungapped": True}
    expected = blastn(query, case["blast_db"], "-task", task, "-outfmt", outfmt, *flags(extra))
    got = run_ours(case, query, task, outfmt, extra)
    expected, got = undated(expected), undated(got)
    assert not compare_lines(expected, got), compare_lines(expected, got)
    assert any("Score = " in line or "<score>" in line or "<Hsp_score>" in line
               for line in expected)


def undated(lines: list) -> list:
    """The lines but the database's date, which the two databases were made at apart."""
    return [line for line in lines if not line.startswith("    Posted date:")]


@pytest.mark.parametrize("words", ["", "SR", "SQ", "SR SQ"])
@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_sam_joins_a_subjects_hsps_as_blastn(case, task, words):
    """blastn's SAM writes a subject's ungapped HSPs as one record (their columns added
    up, the spans from the smallest start to the largest end, the first HSP's strand and
    scores): the file is blastn's but for the @PG line."""
    outfmt = f"17 {words}".strip()
    query = case["queries"]["small"]
    expected = blastn(query, case["blast_db"], "-task", task, "-ungapped", "-outfmt", outfmt)
    got = run_ours(case, query, task, outfmt, {"ungapped": True})
    tabular = blastn(query, case["blast_db"], "-task", task, "-ungapped", "-outfmt",
                     "6 qseqid sseqid")
    assert len(set(tabular)) < len(tabular)  # some subject has several HSPs to join
    expected, got = ([line for line in lines if not line.startswith("@PG")]
                     for lines in (expected, got))
    assert any("\t16\t" in line for line in expected)  # both strands
    assert got == expected, compare_lines(expected, got)


def test_megablast_without_greedy_extension_is_refused_as_blastn(case):
    import subprocess

    args = ["-task", "megablast", "-ungapped", "-no_greedy", "-query",
            case["queries"]["small"], "-outfmt", "6"]
    theirs = subprocess.run(["blastn", *args, "-db", case["blast_db"]], capture_output=True,
                            text=True)
    ours = gblastn("search", *args, "-db", case["our_db"], "-device", "cpu")
    assert theirs.returncode != 0 and ours.returncode != 0
    message = "Greedy extension must be used if gap existence and extension options are zero"
    assert message in theirs.stderr and message in ours.stderr
