"""Golden tests for `-task dc-megablast`: gblastn's tabular output equals real `blastn` 2.12's
line for line on divergent queries (15-25 % substitutions and a few indels, half of them
reverse-complemented) cut from the bundled example database, and on the bundled fragments of
another Klebsiella strain diverged further, for every template (word size 11 and 12,
template length 16, 18 and 21, coding, optimal and both) and the two-hit window's variants;
and blastn's query batches, whose boundaries decide some hits."""

import os

import numpy as np
import pytest

from golden import assert_blastn_found_hits, blastn, compare_lines, flags, golden_databases, \
    hit_lines, lower, mutate, needs_blast, random_dna, read_fasta, revcomp, run_ours, sprinkle, \
    write_fasta

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


# -- blastn's query batches -------------------------------------------------------------------

def batch_boundary_case(folder, seed: int = 5):
    """A hit that only a shared batch finds. In a batch's concatenated query, query A's
    minus strand ends just before query B's plus strand starts, so a seed at A's end and one
    at B's start can share a diagonal within the two-hit window. The subject holds the
    reverse complement of A's first 33 letters, one letter, then B's first 33: apart, each
    query has a lone seed there and no hit; in one batch, B's seed extends. A random
    4,900-letter query comes first, so blastn's first batch (5,000 letters) ends with A;
    it keeps no extension, so the next batch holds 100 letters: B alone."""
    rng = np.random.default_rng(seed)
    a, b, first = random_dna(rng, 200), random_dna(rng, 200), random_dna(rng, 4900)
    subject = np.concatenate([random_dna(rng, 2000), revcomp(a[:33]), random_dna(rng, 1),
                              b[:33], random_dna(rng, 2000)])
    db_fasta = write_fasta(os.path.join(folder, "db.fa"), [("subj1 across queries", subject)])
    return db_fasta, {"across": write_fasta(os.path.join(folder, "q.fa"),
                                            [("Q1", first), ("A", a), ("B", b)])}


@pytest.fixture(scope="module")
def batch_boundary(tmp_path_factory):
    return golden_databases(tmp_path_factory.mktemp("dc_batches"), batch_boundary_case)


@pytest.fixture(scope="module")
def batch_boundary_blastn(batch_boundary) -> list:
    query = batch_boundary["queries"]["across"]
    args = ("-task", "dc-megablast", "-outfmt", COLUMNS)
    one_batch = blastn(query, batch_boundary["blast_db"], *args, env={"BATCH_SIZE": "1000000"})
    expected = blastn(query, batch_boundary["blast_db"], *args)
    assert_blastn_found_hits(one_batch)  # the case's hit depends on the batches ...
    assert expected != one_batch          # ... and blastn's own batches lose it
    return expected


@pytest.fixture(scope="module")
def two_workers():
    """A cluster of two CPU worker processes of one thread, for the cluster's modes."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=40) as local:
        yield local


@pytest.mark.parametrize("mode", ["pipeline", "serial"])
def test_query_batches_are_blastns(batch_boundary, batch_boundary_blastn, mode):
    query = batch_boundary["queries"]["across"]
    got = run_ours(batch_boundary, query, "dc-megablast", COLUMNS, {}, mode)
    assert not compare_lines(batch_boundary_blastn, got), \
        compare_lines(batch_boundary_blastn, got)


@pytest.mark.parametrize("mode", ["replicate", "shard"])
def test_query_batches_on_a_cluster_are_blastns(batch_boundary, batch_boundary_blastn,
                                                two_workers, mode):
    from gblastn.drivers.cluster import ClusterSpec

    query = batch_boundary["queries"]["across"]
    spec = ClusterSpec(scheduler=two_workers.scheduler_address, device="cpu", mode=mode)
    got = run_ours(batch_boundary, query, "dc-megablast", COLUMNS, {}, cluster=spec)
    assert not compare_lines(batch_boundary_blastn, got), \
        compare_lines(batch_boundary_blastn, got)


def test_query_batches_of_the_python_api_are_blastns(batch_boundary, batch_boundary_blastn):
    import gblastn

    results = gblastn.search(batch_boundary["queries"]["across"], batch_boundary["our_db"],
                             task="dc-megablast")
    found = [(r.id, hit.id) for r in results for hit in r.hits]
    expected = [tuple(line.split("\t")[:2]) for line in hit_lines(batch_boundary_blastn)]
    assert found == expected
