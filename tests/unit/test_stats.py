"""Karlin-Altschul statistics: the spec's worked examples, BLAST's error texts, and golden
comparisons of E-values, bit scores, search spaces and Karlin parameters with blastn."""

import math
import re
import shutil
import subprocess
from dataclasses import replace

import numpy as np
import pytest

from gblastn.alphabet import encode_blastna
from gblastn.errors import OptionsError
from gblastn.options import make_options
from gblastn.output.tabular import format_bitscore, format_evalue
from gblastn.query import Query, build_batch
from gblastn.scoring import check_supported_scoring
from gblastn.stats import (INT4_MAX, KarlinBlock, bit_scores, evalues, gapped_params,
                           length_adjustment, prepare_statistics, ungapped_karlin)

DB_LETTERS, DB_SEQS = 150_000, 3


def _random_codes(n, seed=0):
    return np.random.default_rng(seed).integers(0, 4, n).astype(np.uint8)


def _query(text_or_codes, name="q1"):
    codes = encode_blastna(text_or_codes) if isinstance(text_or_codes, str) else text_or_codes
    return Query(name, name, codes, np.zeros(codes.size, dtype=bool))


def _stats(task, n=997, **overrides):
    options = replace(make_options(task, **overrides), dust=None)
    batch = build_batch([_query(_random_codes(n))], options)
    return prepare_statistics(batch, DB_LETTERS, DB_SEQS, options)


# ---- spec §5.2 and §7.1: ungapped parameters of a uniform ACGT query ------------------------

@pytest.mark.parametrize("reward,penalty,lam,k,h,xdrop,trigger,task", [
    (1, -2, "1.3327", "0.621", "1.124", 13, 13, "megablast"),   # X = cutoff (no default)
    (2, -3, "0.6337", "0.408", "0.912", 22, 28, "blastn"),
    (1, -3, "1.3741", "0.711", "1.307", 11, 13, "blastn-short"),
])
def test_ungapped_uniform_query(reward, penalty, lam, k, h, xdrop, trigger, task):
    block = ungapped_karlin(_random_codes(997), reward, penalty)
    assert f"{block.lambda_:.4f}" == lam
    assert f"{block.k:.3f}" == k
    assert f"{block.h:.3f}" == h
    assert block.log_k == math.log(block.k)
    stats = _stats(task, evalue=1e-300)   # tiny E so that the gap trigger is the cutoff
    assert stats.ungapped_xdrop[0] == xdrop
    assert stats.ungapped_cutoff[0] == trigger
    assert stats.reduced_cutoff[0] == int(0.8 * trigger)


def test_ungapped_values_to_the_last_digit():
    # blastn -outfmt 5 prints these with 15 significant digits (blastn-short: gapped = ungapped)
    block = ungapped_karlin(_random_codes(300, seed=3), 1, -3)
    assert "%.15g" % block.lambda_ == "1.37406312246009"
    assert "%.15g" % block.k == "0.710602795216363"
    assert "%.15g" % block.h == "1.30724660390929"


def test_composition_counts_ambiguity_codes_but_not_n():
    plain = _random_codes(400, seed=5)
    with_n = np.concatenate([plain, np.full(50, 14, dtype=np.uint8)])
    assert ungapped_karlin(with_n, 1, -3) == ungapped_karlin(plain, 1, -3)
    with_iupac = np.concatenate([plain, np.array([4, 5, 7, 6] * 5, dtype=np.uint8)])
    assert ungapped_karlin(with_iupac, 1, -3).lambda_ != ungapped_karlin(plain, 1, -3).lambda_


def test_context_without_valid_letters_is_invalid():
    assert ungapped_karlin(np.full(30, 14, dtype=np.uint8), 1, -2) is None
    options = replace(make_options("megablast"), dust=None)
    batch = build_batch([_query("N" * 40), _query(_random_codes(60), "q2")], options)
    stats = prepare_statistics(batch, DB_LETTERS, DB_SEQS, options)
    assert stats.valid.tolist() == [False, False, True, True]
    assert stats.kbp_gapped[0] is None and stats.eff_searchsp[0] == 0
    assert stats.gapped_cutoff[0] == INT4_MAX and stats.ungapped_cutoff[1] == INT4_MAX


def test_strand_not_searched_is_invalid():
    options = replace(make_options("megablast", strand="plus"), dust=None)
    batch = build_batch([_query(_random_codes(100))], options)
    stats = prepare_statistics(batch, DB_LETTERS, DB_SEQS, options)
    assert stats.valid.tolist() == [True, False]


@pytest.mark.parametrize("task,overrides", [
    ("megablast", {}), ("blastn", {}), ("megablast", {"ungapped": True}),
    ("blastn-short", {"gapopen": 5, "gapextend": 2}),   # 1/-3 at 5/2: the ungapped block
    ("blastn", {"evalue": 1e-30}), ("megablast", {"dbsize": 10**9})])
def test_a_batch_has_each_querys_own_statistics(task, overrides):
    """Per-context values worked out once for each block and length (a batch of reads has
    thousands of contexts of a few lengths) are those of each query searched alone: queries
    of equal and of different lengths and compositions, one without valid letters."""
    options = replace(make_options(task, **overrides), dust=None)
    rng = np.random.default_rng(7)
    codes = [_random_codes(n, seed=i) for i, n in enumerate([150, 150, 100, 997, 150])]
    codes[1] = np.where(rng.random(150) < 0.3, 0, codes[1]).astype(np.uint8)  # A-rich
    codes.append(np.full(40, 14, dtype=np.uint8))  # all N
    queries = [_query(c, f"q{i}") for i, c in enumerate(codes)]
    together = prepare_statistics(build_batch(queries, options), DB_LETTERS, DB_SEQS, options)
    for i, query in enumerate(queries):
        alone = prepare_statistics(build_batch([query], options), DB_LETTERS, DB_SEQS, options)
        for name in ("valid", "query_length", "alpha", "beta", "length_adjustment",
                     "eff_searchsp", "ungapped_xdrop", "ungapped_cutoff", "reduced_cutoff",
                     "gapped_cutoff", "lambdas", "log_ks"):
            assert np.array_equal(getattr(together, name)[2 * i:2 * i + 2],
                                  getattr(alone, name)), (i, name)
        for name in ("kbp_ungapped", "kbp_gapped"):
            assert getattr(together, name)[2 * i:2 * i + 2] == getattr(alone, name)


# ---- spec §7.2: gapped parameters --------------------------------------------------------

def test_gapped_table_rows_and_infinite_regime():
    ungapped = ungapped_karlin(_random_codes(500), 1, -2)
    block, alpha, beta, round_down = gapped_params(1, -2, 0, 0, ungapped)
    assert (block.lambda_, block.k, block.h, alpha, beta, round_down) == (1.28, 0.46, 0.85, 1.5, -2, False)
    block, alpha, beta, round_down = gapped_params(2, -3, 5, 2, ungapped_karlin(_random_codes(9), 2, -3))
    assert (block.lambda_, block.k, alpha, beta, round_down) == (0.625, 0.41, 0.8, -2, True)
    short = ungapped_karlin(_random_codes(500), 1, -3)
    block, alpha, beta, round_down = gapped_params(1, -3, 5, 2, short)
    assert block == short and alpha == short.lambda_ / short.h and beta == 0
    two_three = ungapped_karlin(_random_codes(500), 2, -3)
    block, alpha, beta, _ = gapped_params(2, -3, 7, 4, two_three)
    assert block == two_three and beta == -2     # ungapped beta rule for 2/-3


def test_gcd_scaling():
    ungapped = ungapped_karlin(_random_codes(500), 2, -4)
    block, alpha, beta, round_down = gapped_params(2, -4, 4, 4, ungapped)   # 1/-2 row (2,2)
    assert block.lambda_ == 1.33 / 2 and block.k == 0.62 and alpha == 1.2 / 2 and beta == 0
    # the ungapped beta rule looks at the scores as given: 4/-6 is not 2/-3
    ungapped = ungapped_karlin(_random_codes(500), 4, -6)
    _, _, beta, round_down = gapped_params(4, -6, 20, 20, ungapped)
    assert beta == 0 and round_down


def test_unsupported_gap_costs_message():
    with pytest.raises(OptionsError) as err:
        check_supported_scoring(1, -2, 1, 4)
    assert str(err.value) == "\n".join([
        "Gap existence and extension values 1 and 4 are not supported for substitution scores 1 and -2",
        "2 and 2 are supported existence and extension values",
        "1 and 2 are supported existence and extension values",
        "0 and 2 are supported existence and extension values",
        "3 and 1 are supported existence and extension values",
        "2 and 1 are supported existence and extension values",
        "1 and 1 are supported existence and extension values",
        "2 and 2 are supported existence and extension values",
        "Any values more stringent than 2 and 2 are supported"])
    with pytest.raises(OptionsError) as err:
        check_supported_scoring(2, -2, 5, 2)   # gcd 2: the 1/-1 table with doubled costs
    assert "8 and 2 are supported existence and extension values" in str(err.value)
    assert "Any values more stringent than 8 and 4 are supported" in str(err.value)
    with pytest.raises(OptionsError, match="^Substitution scores 3 and -5 are not supported$"):
        check_supported_scoring(3, -5, 5, 2)
    check_supported_scoring(1, -2, 4, 4)   # infinite regime
    check_supported_scoring(1, -3, 5, 2)   # blastn-short
    check_supported_scoring(2, -3, 0, 0)   # linear row


# ---- spec §6.1 and §7.5: X-drops, length adjustment, search space, E-values ----------------

@pytest.mark.parametrize("task,ell,searchsp,gap_x,gap_x_final", [
    ("megablast", 19, 146_644_254, 13, 54),
    ("blastn", 20, 146_491_380, 33, 110),
    ("blastn-short", 14, 147_408_714, 15, 50),
])
def test_worked_examples(task, ell, searchsp, gap_x, gap_x_final):
    stats = _stats(task)
    assert stats.length_adjustment.tolist() == [ell, ell]
    assert stats.eff_searchsp.tolist() == [searchsp, searchsp]
    assert (stats.gap_xdrop, stats.gap_xdrop_final) == (gap_x, gap_x_final)


def test_small_database_cutoff_below_gap_trigger():
    stats = _stats("blastn")
    assert stats.gapped_cutoff[0] == 25 and stats.ungapped_cutoff[0] == 25
    assert stats.reduced_cutoff[0] == 20


@pytest.mark.parametrize("task,score,bits,evalue", [
    ("megablast", 878, "1622", "0.0"),
    ("blastn", 26, "24.7", "5.3"),
    ("blastn", 29, "27.4", "1.5"),      # E from 28: 2/-3 rounds odd scores down
    ("blastn-short", 13, "26.3", "1.8"),
])
def test_evalue_and_bits_examples(task, score, bits, evalue):
    stats = _stats(task)
    scores, contexts = np.array([score]), np.array([1])
    assert format_bitscore(bit_scores(scores, contexts, stats)[0]) == bits
    assert format_evalue(evalues(scores, contexts, stats)[0]) == evalue


def test_length_adjustment_edge_cases():
    kbp = KarlinBlock(0.625, 0.41, math.log(0.41), 0.78)
    assert length_adjustment(kbp, 0.8 / 0.625, -2, 2, 2, 1) == 0   # negative constant term
    assert length_adjustment(kbp, 0.8 / 0.625, -2, 997, 150_000, 3) == 20


# ---- golden: compare with the real blastn --------------------------------------------------

BLASTN = shutil.which("blastn")
needs_blast = pytest.mark.skipif(BLASTN is None or shutil.which("makeblastdb") is None,
                                 reason="NCBI BLAST+ not installed")

_COMP = str.maketrans("ACGTN", "TGCAN")


def _mutate(rng, seq, rate):
    letters = np.array(list(seq))
    flip = rng.random(letters.size) < rate
    letters[flip] = rng.choice(list("ACGT"), int(flip.sum()))
    return "".join(letters)


@pytest.fixture(scope="module")
def golden_data(tmp_path_factory):
    """3 subjects, 150 kb; queries made of subject pieces at several divergences, on both
    strands, one query with N runs and ambiguity codes."""
    rng = np.random.default_rng(42)
    work = tmp_path_factory.mktemp("stats_golden")
    subjects = ["".join(rng.choice(list("ACGT"), n)) for n in (70_000, 50_000, 30_000)]
    with open(work / "db.fa", "w") as f:
        for i, s in enumerate(subjects):
            f.write(f">subj{i} subject {i}\n{s}\n")
    pieces = []
    for k in range(12):
        s = subjects[k % 3]
        start = int(rng.integers(0, len(s) - 400))
        piece = _mutate(rng, s[start:start + int(rng.integers(40, 300))], [0.02, 0.1, 0.2, 0.3][k % 4])
        pieces.append(piece[::-1].translate(_COMP) if k % 2 else piece)
    filler = lambda n: "".join(rng.choice(list("ACGT"), n))
    q1 = "".join(p + filler(30) for p in pieces[:6])
    q2 = "".join(p + filler(30) for p in pieces[6:])
    q3 = q1[:400] + "N" * 60 + "RYKMSWRYKM" * 3 + q2[:500] + "N" * 25 + q1[600:900]
    queries = {"q1": q1, "q2": q2, "q3": q3}
    with open(work / "q.fa", "w") as f:
        for name, seq in queries.items():
            f.write(f">{name} query {name}\n{seq}\n")
    subprocess.run(["makeblastdb", "-in", str(work / "db.fa"), "-dbtype", "nucl", "-out",
                    str(work / "db")], check=True, capture_output=True)
    return work, queries


def _run_blastn(work, task, extra=(), outfmt="6 qseqid sseqid sstart send evalue bitscore score"):
    cmd = [BLASTN, "-task", task, "-query", str(work / "q.fa"), "-db", str(work / "db"),
           "-outfmt", outfmt, "-dust", "no", *extra]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def _our_stats(queries, task, **overrides):
    options = replace(make_options(task, **overrides), dust=None)
    qs = [_query(seq, name) for name, seq in queries.items()]
    batch = build_batch(qs, options)
    return prepare_statistics(batch, DB_LETTERS, DB_SEQS, options), [q.id for q in qs]


GOLDEN_CASES = [
    ("megablast", (), {}),
    ("blastn", (), {}),
    ("blastn-short", ("-evalue", "1000"), {"evalue": 1000.0}),
    ("blastn", ("-gapopen", "7", "-gapextend", "4"), {"gapopen": 7, "gapextend": 4}),
]


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("task,extra,overrides", GOLDEN_CASES)
def test_golden_evalues_and_bits(golden_data, task, extra, overrides):
    work, queries = golden_data
    stats, names = _our_stats(queries, task, **overrides)
    lines = _run_blastn(work, task, extra).splitlines()
    assert len(lines) >= 5
    for line in lines:
        qid, _, sstart, send, evalue, bits, score = line.split("\t")
        context = 2 * names.index(qid) + (1 if int(sstart) > int(send) else 0)
        s, c = np.array([int(score)]), np.array([context])
        assert format_evalue(evalues(s, c, stats)[0]) == evalue, line
        assert format_bitscore(bit_scores(s, c, stats)[0]) == bits, line


def _xml_statistics(text):
    """Per query: (hsp-len, eff-space, kappa, lambda, entropy) as printed."""
    found = re.findall(r"<Statistics_hsp-len>(\d+)</Statistics_hsp-len>\s*"
                       r"<Statistics_eff-space>(\d+)</Statistics_eff-space>\s*"
                       r"<Statistics_kappa>([^<]+)</Statistics_kappa>\s*"
                       r"<Statistics_lambda>([^<]+)</Statistics_lambda>\s*"
                       r"<Statistics_entropy>([^<]+)</Statistics_entropy>", text)
    return [(int(a), int(b), float(k), float(lam), float(h)) for a, b, k, lam, h in found]


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("task,extra,overrides", GOLDEN_CASES)
def test_golden_search_space_and_karlin(golden_data, task, extra, overrides):
    work, queries = golden_data
    stats, _ = _our_stats(queries, task, **overrides)
    printed = _xml_statistics(_run_blastn(work, task, extra, outfmt="5"))
    assert len(printed) == len(queries)
    for q, (ell, searchsp, kappa, lam, entropy) in enumerate(printed):
        c = 2 * q
        assert stats.length_adjustment[c] == ell
        assert stats.eff_searchsp[c] == searchsp
        block = stats.kbp_gapped[c]
        assert float("%.15g" % block.k) == kappa
        assert float("%.15g" % block.lambda_) == lam
        assert float("%.15g" % block.h) == entropy


@needs_blast
@pytest.mark.golden
def test_golden_pairwise_footer(golden_data):
    """The -outfmt 0 footer: ungapped and gapped Lambda K H and the search space."""
    work, queries = golden_data
    stats, _ = _our_stats(queries, "blastn")
    text = _run_blastn(work, "blastn", outfmt="0")
    blocks = re.findall(r"Lambda +K +H\n +(\S+) +(\S+) +(\S+) *\n\nGapped\nLambda +K +H\n"
                        r" +(\S+) +(\S+) +(\S+) *\n\nEffective search space used: (\d+)", text)
    assert len(blocks) == len(queries)
    for q, values in enumerate(blocks):
        ungapped, gapped = stats.kbp_ungapped[2 * q], stats.kbp_gapped[2 * q]
        ours = ["%.3g" % ungapped.lambda_, "%.3g" % ungapped.k, "%.3g" % ungapped.h,
                "%.3g" % gapped.lambda_, "%.3g" % gapped.k, "%.3g" % gapped.h]
        assert [float(v) for v in values[:6]] == [float(v) for v in ours]
        assert int(values[6]) == stats.eff_searchsp[2 * q]


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("soft", [True, False])
def test_golden_hard_masking_changes_composition(tmp_path, soft):
    """With hard masking BLAST takes the composition after masked letters became N."""
    rng = np.random.default_rng(9)
    subject = "".join(rng.choice(list("ACGT"), 3000))
    text = subject[100:400] + "rykmswrykmswrykm" + subject[600:900]
    (tmp_path / "s.fa").write_text(">s1\n" + subject + "\n")
    (tmp_path / "q.fa").write_text(">q1\n" + text + "\n")
    subprocess.run(["makeblastdb", "-in", str(tmp_path / "s.fa"), "-dbtype", "nucl", "-out",
                    str(tmp_path / "s")], check=True, capture_output=True)
    out = subprocess.run([BLASTN, "-task", "blastn-short", "-query", str(tmp_path / "q.fa"),
                          "-db", str(tmp_path / "s"), "-outfmt", "5", "-lcase_masking",
                          "-soft_masking", "true" if soft else "false"],
                         check=True, capture_output=True, text=True).stdout
    ell, searchsp, kappa, lam, entropy = _xml_statistics(out)[0]
    options = replace(make_options("blastn-short", lcase_masking=True, soft_masking=soft),
                      dust=None)
    lowercase = np.array([c.islower() for c in text])
    batch = build_batch([Query("q1", "q1", encode_blastna(text.upper()), lowercase)], options)
    stats = prepare_statistics(batch, 3000, 1, options)
    assert float("%.15g" % stats.kbp_gapped[0].lambda_) == lam
    assert float("%.15g" % stats.kbp_gapped[0].k) == kappa
    assert (stats.length_adjustment[0], stats.eff_searchsp[0]) == (ell, searchsp)
