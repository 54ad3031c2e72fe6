"""Megablast's ungapped X-drop: blastn leaves it at 0 for megablast, which means "use the
context's ungapped cutoff"; an explicit -xdrop_ungap (and the other tasks' 20-bit default)
goes through ceil(bits * ln2 / lambda)."""

import math
from dataclasses import replace

import numpy as np
import pytest

from golden import assert_blastn_found_hits, blastn, compare_lines, makeblastdb, needs_blast, \
    random_dna, write_fasta
from gblastn.options import make_options
from gblastn.query import Query, build_batch
from gblastn.stats import LN2, prepare_statistics


def _stats(task, **overrides):
    codes = np.random.default_rng(0).integers(0, 4, 997).astype(np.uint8)
    options = replace(make_options(task, **overrides), dust=None)
    batch = build_batch([Query("q", "q", codes, np.zeros(codes.size, dtype=bool))], options)
    return prepare_statistics(batch, 150_000, 3, options)


@pytest.mark.parametrize("evalue", [10.0, 1.0, 1e-300])
def test_megablast_default_xdrop_is_the_ungapped_cutoff(evalue):
    stats = _stats("megablast", evalue=evalue)
    assert (stats.ungapped_xdrop == stats.ungapped_cutoff).all()


def test_explicit_xdrop_ungap_uses_bits():
    stats = _stats("megablast", xdrop_ungap=20.0)
    lam = stats.kbp_ungapped[0].lambda_
    assert stats.ungapped_xdrop[0] == math.ceil(20.0 * LN2 / lam) == 11
    assert _stats("blastn").ungapped_xdrop[0] == 22


@pytest.fixture(scope="module")
def repeat_case(tmp_path_factory):
    # a subject holding a low-complexity block twice; with X = cutoff >= 12 the ungapped
    # extension of a seed on a CA diagonal 6 off crosses six mismatches into the T block,
    # which moves the chain of shifted copies that megablast reports
    folder = tmp_path_factory.mktemp("xdrop")
    rng = np.random.default_rng(11)
    block = np.frombuffer(b"CA" * 60 + b"T" * 50 + b"GGA" * 30, dtype=np.uint8)
    subject = np.concatenate([block, random_dna(rng, 3000), block])
    query = np.concatenate([random_dna(rng, 700), block, random_dna(rng, 700)])
    db = makeblastdb(write_fasta(folder / "db.fa", [("subj low complexity", subject)]),
                     str(folder / "bdb"))
    from gblastn.db.writer import make_db
    ours = str(make_db([str(folder / "db.fa")], str(folder / "gdb"), progress=False))
    return {"query": write_fasta(folder / "q.fa", [("q", query)]), "blast_db": db,
            "our_db": ours, "folder": folder}


@pytest.mark.golden
@needs_blast
@pytest.mark.parametrize("extra", [{"evalue": 10}, {"evalue": 2}, {"evalue": 2, "xdrop_ungap": 20}])
def test_low_complexity_repeat_matches_blastn(repeat_case, extra):
    from gblastn.drivers.run import OutputSpec, run_search

    outfmt = "6 qstart qend sstart send score btop"
    flags = [arg for key, value in extra.items() for arg in (f"-{key}", str(value))]
    expected = blastn(repeat_case["query"], repeat_case["blast_db"], "-task", "megablast",
                      "-dust", "no", "-outfmt", outfmt, *flags)
    assert_blastn_found_hits(expected)
    out = str(repeat_case["folder"] / "ours.out")
    run_search([repeat_case["query"]], repeat_case["our_db"],
               make_options("megablast", dust="no", **extra),
               OutputSpec(outfmt, out, None, repeat_case["blast_db"]))
    with open(out) as handle:
        got = handle.read().splitlines()
    assert not compare_lines(expected, got), compare_lines(expected, got)
