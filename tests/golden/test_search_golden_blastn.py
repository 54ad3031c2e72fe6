"""Golden tests for the DP tasks: gblastn `-task blastn` and `-task blastn-short` output equals
real `blastn` 2.12 output line for line."""

import os

import numpy as np
import pytest

from golden import assert_blastn_found_hits, blastn, compare_lines, flags, golden_databases, \
    lower, mutate, needs_blast, random_dna, revcomp, run_ours, sprinkle, write_fasta

pytestmark = [pytest.mark.golden, needs_blast]

COLUMNS = "6 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore score sstrand"
CUSTOM = "7 qaccver saccver qlen slen pident nident gaps gapopen qcovs qcovhsp evalue bitscore btop"


def blastn_case(folder, seed: int = 11):
    """A small database and query files for the DP tasks. Returns (db_fasta, {name: path})."""
    rng = np.random.default_rng(seed)
    base = random_dna(rng, 24_000)
    lowc = np.frombuffer(b"CA" * 50 + b"T" * 40 + b"GGA" * 25, dtype=np.uint8)
    repeat_unit = random_dna(rng, 300)

    queries = [
        ("qb1 plain region", base[1000:2500]),
        ("qb2 N runs and IUPAC", sprinkle(rng, base[3000:4600], n_runs=2, n_iupac=6)),
        ("qb3 low complexity inside", np.concatenate([base[5000:5500], lowc, base[5500:6000]])),
        ("qb4 lower case part", lower(base[7000:8400], 0, 500)),
        ("qb5 minus-strand copy", revcomp(base[9000:10200])),
        ("qb6 repeat element", repeat_unit),
        ("qb7 no homology", random_dna(rng, 900)),
        ("qb8 short", base[11000:11045]),
        ("qb9 identical subjects", base[15500:16300]),
        ("qb10 diverged with indels", mutate(rng, base[12000:13500], 0.10, 0.02)),
    ]
    reads = []
    for k in range(16):
        n = int(rng.integers(50, 151))
        start = int(rng.integers(0, base.size - n))
        read = mutate(rng, base[start:start + n], float(rng.uniform(0.0, 0.06)),
                      0.01 if k % 3 == 0 else 0.0)
        if k % 4 == 1:
            read = sprinkle(rng, read, n_runs=1, run_len=(1, 6))
        if k % 5 == 2:
            read = revcomp(read)
        reads.append((f"read{k}", read))
    reads.append(("read_random", random_dna(rng, 80)))

    repeats = np.concatenate([np.concatenate([random_dna(rng, int(rng.integers(150, 400))),
                                              mutate(rng, repeat_unit, 0.08, 0.01)])
                              for _ in range(8)])
    subjects = [
        ("subj1 mutated copy", sprinkle(rng, mutate(rng, base, 0.04, 0.006), n_runs=3, n_iupac=10)),
        ("subj2 diverged copy", mutate(rng, base[:14000], 0.15, 0.015)),
        ("subj3 repeats", repeats),
        ("subj4 reverse complement", revcomp(mutate(rng, base[8000:12500], 0.03, 0.004))),
        ("subj5 tiny", base[1100:1109]),
        ("dupA identical", base[15000:17000]),
        ("dupB identical", base[15000:17000]),
        ("subj6 low complexity", np.concatenate([lowc, random_dna(rng, 1500), lowc])),
    ]
    db_fasta = write_fasta(os.path.join(folder, "db.fa"), subjects)
    paths = {"queries": write_fasta(os.path.join(folder, "q.fa"), queries),
             "reads": write_fasta(os.path.join(folder, "reads.fa"), reads)}
    return db_fasta, paths


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    return golden_databases(tmp_path_factory.mktemp("blastn"), blastn_case)


CASES = {
    # task blastn
    "blastn_default": ("blastn", "queries", COLUMNS, {}),
    "blastn_outfmt7_custom": ("blastn", "queries", CUSTOM, {}),
    "blastn_max_target_seqs": ("blastn", "queries", COLUMNS, {"max_target_seqs": 2}),
    "blastn_max_hsps": ("blastn", "queries", COLUMNS, {"max_hsps": 1}),
    "blastn_evalue_tight": ("blastn", "queries", COLUMNS, {"evalue": 1e-5}),
    "blastn_evalue_loose": ("blastn", "queries", COLUMNS, {"evalue": 100}),
    "blastn_strand_minus": ("blastn", "queries", COLUMNS, {"strand": "minus"}),
    "blastn_lcase_no_dust": ("blastn", "queries", COLUMNS, {"lcase_masking": True, "dust": "no"}),
    "blastn_perc_identity": ("blastn", "queries", COLUMNS, {"perc_identity": 90}),
    "blastn_1_2_gaps_5_2": ("blastn", "queries", COLUMNS,
                            {"reward": 1, "penalty": -2, "gapopen": 5, "gapextend": 2}),
    "blastn_2_3_gaps_4_4": ("blastn", "queries", COLUMNS,
                            {"reward": 2, "penalty": -3, "gapopen": 4, "gapextend": 4}),
    "blastn_1_1_gaps_3_2": ("blastn", "queries", COLUMNS,
                            {"reward": 1, "penalty": -1, "gapopen": 3, "gapextend": 2}),
    "blastn_4_5_gaps_6_5": ("blastn", "queries", COLUMNS,
                            {"reward": 4, "penalty": -5, "gapopen": 6, "gapextend": 5}),
    "blastn_word_size_8": ("blastn", "queries", COLUMNS, {"word_size": 8}),
    "blastn_reads": ("blastn", "reads", COLUMNS, {}),
    # task blastn-short
    "short_reads": ("blastn-short", "reads", COLUMNS, {}),
    "short_reads_custom": ("blastn-short", "reads", CUSTOM, {}),
    "short_reads_evalue_1000": ("blastn-short", "reads", COLUMNS, {"evalue": 1000}),
    "short_reads_max_hsps": ("blastn-short", "reads", COLUMNS, {"max_hsps": 2, "max_target_seqs": 3}),
    "short_queries": ("blastn-short", "queries", COLUMNS, {"evalue": 1e-3}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dp_tasks_match_blastn(case, name):
    task, which, outfmt, extra = CASES[name]
    query = case["queries"][which]
    expected = blastn(query, case["blast_db"], "-task", task, "-outfmt", outfmt, *flags(extra))
    got = run_ours(case, query, task, outfmt, extra)
    assert_blastn_found_hits(expected)
    if outfmt.startswith("7"):
        # the '# Database:' line names the database as given, which differs between the tools
        expected = [line for line in expected if not line.startswith("# Database:")]
        got = [line for line in got if not line.startswith("# Database:")]
    assert not compare_lines(expected, got), compare_lines(expected, got)
