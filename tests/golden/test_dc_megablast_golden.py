"""Golden tests for `-task dc-megablast`: gblastn's tabular output equals real `blastn` 2.12's
line for line on divergent queries (15-25 % substitutions and a few indels, half of them
reverse-complemented) cut from the bundled example database, and on the bundled fragments of
another Klebsiella strain diverged further, for every template (word size 11 and 12,
template length 16, 18 and 21, coding, optimal and both) and the two-hit window's
variants."""

import os

import numpy as np
import pytest

from golden import assert_blastn_found_hits, blastn, compare_lines, flags, golden_databases, \
    lower, mutate, needs_blast, read_fasta, revcomp, run_ours, sprinkle, write_fasta

pytestmark = [pytest.mark.golden, needs_blast]

REPOSITORY = os.path.join(os.path.dirname(__file__), "..", "..")
EXAMPLE_DB = os.path.join(REPOSITORY, "db", "HS11286_chr_1-300000.fa")
OTHER_STRAIN = [os.path.join(REPOSITORY, "queries", f"kp1084_{size}.fa")
                for size in ("small", "medium", "large")]
COLUMNS = ("6 qseqid sseqid pident length mismatch gapopen gaps qstart qend sstart send "
           "evalue bitscore score sstrand")


def example_letters() -> np.ndarray:
    with open(EXAMPLE_DB) as handle:
        text = "".join(line.strip() for line in handle if not line.startswith(">"))
    return np.frombuffer(text.encode(), dtype=np.uint8)


def diverged_queries(rng, letters: np.ndarray, count: int) -> list:
    """`count` pieces of 300-900 letters, 15-25 % substituted and 1 % indels; every other
    one reverse-complemented (a minus-strand hit), some with an N run and ambiguity codes,
    some partly in lower case."""
    queries = []
    for k in range(count):
        n = int(rng.integers(300, 900))
        start = int(rng.integers(0, letters.size - n))
        query = mutate(rng, letters[start:start + n], float(rng.uniform(0.15, 0.25)), 0.01)
        if k % 3 == 1:
            query = sprinkle(rng, query, n_runs=1, n_iupac=3)
        if k % 4 == 2:
            query = lower(query, 50, 200)
        if k % 2:
            query = revcomp(query)
        queries.append((f"dq{k}_{start}", query))
    return queries


def dc_megablast_case(folder, seed: int = 2021):
    """The example database and two query files: `few` (8 queries, under 8,000 letters with
    both strands: the diagonal array) and `many` (30 queries: the diagonal hash)."""
    rng = np.random.default_rng(seed)
    letters = example_letters()
    db_fasta = os.path.join(folder, "db.fa")
    write_fasta(db_fasta, [("chr1_part Klebsiella pneumoniae HS11286, 1-300000", letters)])
    return db_fasta, {
        "few": write_fasta(os.path.join(folder, "few.fa"), diverged_queries(rng, letters, 8)),
        "many": write_fasta(os.path.join(folder, "many.fa"), diverged_queries(rng, letters, 30)),
    }


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    return golden_databases(tmp_path_factory.mktemp("dc_megablast"), dc_megablast_case)


TEMPLATES = {f"w{w}_t{t}_{kind}": ("few", {"word_size": w, "template_length": t,
                                           "template_type": kind})
             for w in (11, 12) for t in (16, 18, 21)
             for kind in ("coding", "optimal", "coding_and_optimal")}
OTHERS = {
    "defaults": ("few", {}),
    "hash_defaults": ("many", {}),
    "hash_w12_t16_both": ("many", {"word_size": 12, "template_length": 16,
                                   "template_type": "coding_and_optimal"}),
    "hash_one_hit": ("many", {"window_size": 0}),
    "one_hit": ("few", {"window_size": 0}),
    "wide_window": ("few", {"window_size": 100}),
    "strand_minus": ("few", {"strand": "minus"}),
    "evalue_1000": ("few", {"evalue": 1000}),
    "lcase_masking": ("few", {"lcase_masking": True}),
}


@pytest.mark.parametrize("name", sorted(TEMPLATES) + sorted(OTHERS))
def test_dc_megablast_matches_blastn(case, name):
    which, extra = {**TEMPLATES, **OTHERS}[name]
    query = case["queries"][which]
    expected = blastn(query, case["blast_db"], "-task", "dc-megablast", "-outfmt", COLUMNS,
                      *flags(extra))
    got = run_ours(case, query, "dc-megablast", COLUMNS, extra)
    assert_blastn_found_hits(expected)
    assert not compare_lines(expected, got), compare_lines(expected, got)


def test_megablast_with_a_template_matches_blastn(case):
    """blastn's megablast reads discontiguous words too when given a template (with its own
    scoring, greedy extension and one hit per extension)."""
    extra = {"word_size": 12, "template_length": 21, "template_type": "coding_and_optimal",
             "evalue": 1000}
    query = case["queries"]["few"]
    expected = blastn(query, case["blast_db"], "-task", "megablast", "-outfmt", COLUMNS,
                      *flags(extra))
    got = run_ours(case, query, "megablast", COLUMNS, extra)
    assert_blastn_found_hits(expected)
    assert not compare_lines(expected, got), compare_lines(expected, got)


# -- the other strain's fragments, diverged ---------------------------------------------------

DIVERGENCES = (0.15, 0.20, 0.25)


def other_strain_case(folder, seed: int = 1084):
    """The example database and one query file: each of the 12 fragments of strain 1084 in
    queries/ (about 99.4 % identical to the database's slice, with real indels) diverged
    further at 15, 20 and 25 % with 1 % short indels, every other one reverse-complemented:
    36 queries, about 124,000 letters, which blastn searches in two batches (5,000 letters,
    then the rest)."""
    rng = np.random.default_rng(seed)
    fragments = [record for path in OTHER_STRAIN for record in read_fasta(path)]
    queries = []
    for rate in DIVERGENCES:
        for k, (name, letters) in enumerate(fragments):
            query = mutate(rng, letters, rate, 0.01)
            queries.append((f"{name}_d{round(rate * 100)}", revcomp(query) if k % 2 else query))
    db_fasta = os.path.join(folder, "db.fa")
    write_fasta(db_fasta, [("chr1_part Klebsiella pneumoniae HS11286, 1-300000",
                            example_letters())])
    return db_fasta, {"diverged": write_fasta(os.path.join(folder, "diverged.fa"), queries)}


@pytest.fixture(scope="module")
def other_strain(tmp_path_factory):
    return golden_databases(tmp_path_factory.mktemp("dc_other_strain"), other_strain_case)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_other_strain_diverged_matches_blastn(other_strain, name):
    _, extra = TEMPLATES[name]
    query = other_strain["queries"]["diverged"]
    expected = blastn(query, other_strain["blast_db"], "-task", "dc-megablast", "-outfmt",
                      COLUMNS, *flags(extra))
    got = run_ours(other_strain, query, "dc-megablast", COLUMNS, extra)
    assert_blastn_found_hits(expected)
    assert not compare_lines(expected, got), compare_lines(expected, got)

