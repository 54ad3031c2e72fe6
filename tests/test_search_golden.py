"""Golden tests: gblastn search output equals real `blastn` 2.12 output line for line."""

import pytest

from golden import blastn, compare_lines, gblastn, makeblastdb, megablast_case, needs_blast

pytestmark = [pytest.mark.golden, needs_blast]

COLUMNS = "6 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore score sstrand"


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    from gblastn.db.writer import make_db

    folder = tmp_path_factory.mktemp("megablast")
    db_fasta, queries = megablast_case(str(folder))
    blast_db = makeblastdb(db_fasta, str(folder / "blastdb"))
    our_db = make_db([db_fasta], str(folder / "gdb"), progress=False)
    return {"blast_db": blast_db, "our_db": str(our_db), "queries": queries, "folder": folder}


def run_ours(case, query: str, task: str, outfmt: str, extra: dict) -> list:
    from gblastn.options import make_options
    from gblastn.pipeline import OutputSpec, run_search

    out = str(case["folder"] / "ours.out")
    options = make_options(task, **extra)
    run_search([query], case["our_db"], options, OutputSpec(outfmt, out, None, case["blast_db"]))
    with open(out) as handle:
        return handle.read().splitlines()


def flags(extra: dict) -> list:
    args = []
    for key, value in extra.items():
        if value is True:
            args.append(f"-{key}")
        else:
            args += [f"-{key}", str(value)]
    return args


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
    assert not compare_lines(expected, got), compare_lines(expected, got)


def test_cli_search_matches_blastn(case, tmp_path):
    query = case["queries"]["small"]
    expected = blastn(query, case["blast_db"], "-outfmt", "7")
    out = tmp_path / "cli.out"
    done = gblastn("search", "-db", case["our_db"], "-query", query, "-outfmt", "7", "-out", str(out))
    assert done.returncode == 0, done.stderr
    got = out.read_text().splitlines()
    # the '# Database:' line names the database as given, which differs between the two tools
    expected = [line for line in expected if not line.startswith("# Database:")]
    got = [line for line in got if not line.startswith("# Database:")]
    assert not compare_lines(expected, got), compare_lines(expected, got)
