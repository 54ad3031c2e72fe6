"""Golden tests of -db_soft_mask and -db_hard_mask: a BLAST+ database made with masking data
(dustmasker's and windowmasker's, makeblastdb -mask_data) is searched without seeds in the
masked ranges of its sequences, extensions going through them (soft) or each unmasked range
searched apart and the masked letters aligned as blastn's mask letter (hard), as blastn 2.12
searches it: the same hits for every task, one volume or several, identities counted on the
letters each report reads, and the pairwise report's masked subject letters in lower case
under its 'Masked using' lines."""

import subprocess

import numpy as np
import pytest

from golden import BASES, assert_blastn_found_hits, gblastn, hit_lines, mutate, needs_blast, \
    random_dna, same_as_blastn, write_fasta

pytestmark = [pytest.mark.golden, needs_blast]

REPEATS = [np.frombuffer(unit, dtype=np.uint8) for unit in (b"CA", b"T", b"GGA", b"ATTG")]
DUST, WINDOWMASKER = "11", "30"  # the algorithm ids makeblastdb gives them


def _low_complexity(rng, length: int) -> np.ndarray:
    unit = REPEATS[int(rng.integers(0, len(REPEATS)))]
    return np.tile(unit, length // unit.size + 1)[:length]


def _with_repeats(rng, letters: np.ndarray, count: int) -> np.ndarray:
    for _ in range(count):
        at = int(rng.integers(0, letters.size))
        letters = np.concatenate([letters[:at], _low_complexity(rng, int(rng.integers(30, 200))),
                                  letters[at:]])
    return letters


def _run(args, **kwargs):
    return subprocess.run(args, check=True, capture_output=True, **kwargs)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    folder = tmp_path_factory.mktemp("db_mask")
    rng = np.random.default_rng(71)
    base = random_dna(rng, 20_000)
    subjects = []
    for number in range(20):
        start = int(rng.integers(0, 17_000))
        letters = mutate(rng, base[start:start + int(rng.integers(800, 3_000))], 0.04, 0.002)
        subjects.append((f"s{number} subject {number}",
                         _with_repeats(rng, letters, int(rng.integers(0, 4)))))
    # a subject whose similarity to the query lies in masked repeats only
    subjects.append(("s20 repeats", np.concatenate([_low_complexity(rng, 150),
                                                    random_dna(rng, 300),
                                                    _low_complexity(rng, 150)])))
    fasta = write_fasta(folder / "db.fa", subjects)
    queries = [(f"q{n}", _with_repeats(rng, mutate(rng, base[s:s + 1_500], 0.03), 2))
               for n, s in enumerate(rng.integers(0, 18_000, 4))]
    queries.append(("q_repeats", np.concatenate([subjects[-1][1][:150], BASES[[0, 1] * 20],
                                                 subjects[-1][1][-150:]])))
    query = write_fasta(folder / "q.fa", queries)
    dust, counts, windows = (str(folder / name) for name in ("dust.asnb", "wm.counts",
                                                             "wm.asnb"))
    _run(["dustmasker", "-in", fasta, "-outfmt", "maskinfo_asn1_bin", "-out", dust,
          "-parse_seqids"])
    _run(["windowmasker", "-in", fasta, "-mk_counts", "-out", counts, "-parse_seqids"])
    _run(["windowmasker", "-in", fasta, "-ustat", counts, "-outfmt", "maskinfo_asn1_bin",
          "-out", windows, "-parse_seqids"])
    dbs = {}
    for name, args in {"one": [], "volumes": ["-max_file_sz", "6000"]}.items():
        _run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-parse_seqids", "-mask_data",
              f"{dust},{windows}", "-out", str(folder / name), *args])
        dbs[name] = str(folder / name)
    return {"folder": folder, "fasta": fasta, "query": query, "dbs": dbs}


@pytest.mark.parametrize("task", ["megablast", "blastn", "blastn-short", "dc-megablast"])
@pytest.mark.parametrize("mask", ["-db_soft_mask", "-db_hard_mask"])
@pytest.mark.parametrize("algorithm", [DUST, WINDOWMASKER])
def test_the_masked_search_as_blastn(case, task, mask, algorithm):
    """The masks change the hits (no seed in a repeat), and the hits are blastn's."""
    args = ["-task", task, "-dust", "no", "-outfmt", "6 std score"]
    masked = same_as_blastn(case["query"], case["dbs"]["one"], *args, mask, algorithm)
    assert_blastn_found_hits(masked)
    everything = subprocess.run(["blastn", "-query", case["query"], "-db", case["dbs"]["one"],
                                 *args], capture_output=True, text=True, check=True)
    assert hit_lines(everything.stdout) != hit_lines(masked)


@pytest.mark.parametrize("args", [["-task", "blastn", "-dust", "no"], ["-num_threads", "2"],
                                  ["-taxids", "0", "-task", "blastn-short"]])
@pytest.mark.parametrize("mask", ["-db_soft_mask", "-db_hard_mask"])
def test_several_volumes_and_other_options_as_blastn(case, args, mask):
    lines = same_as_blastn(case["query"], case["dbs"]["volumes"], *args, mask, DUST,
                           "-outfmt", "7 std")
    assert_blastn_found_hits(lines)


@pytest.mark.parametrize("mask", ["-db_soft_mask", "-db_hard_mask"])
def test_the_pairwise_report_as_blastn(case, mask):
    """Its 'Masked using' lines name the algorithm, masked subject letters are lower case."""
    lines = same_as_blastn(case["query"], case["dbs"]["one"], "-dust", "no", mask, DUST)
    assert sum(line.lstrip().startswith("Masked using: ") for line in lines) == 2
    assert any(line.startswith("Sbjct") and any(c.islower() for c in line) for line in lines)


@pytest.fixture(scope="module")
def across_a_mask(tmp_path_factory):
    """A subject whose alignment with the query crosses short masked repeats."""
    folder = tmp_path_factory.mktemp("across_a_mask")
    rng = np.random.default_rng(5)
    letters = np.concatenate([random_dna(rng, 600), _low_complexity(rng, 14),
                              random_dna(rng, 600)])
    fasta = write_fasta(folder / "db.fa", [("s1 subject", letters)])
    query = write_fasta(folder / "q.fa", [("q", letters[100:1_100])])
    masks = str(folder / "dust.asnb")
    _run(["dustmasker", "-in", fasta, "-outfmt", "maskinfo_asn1_bin", "-out", masks,
          "-parse_seqids", "-level", "10"])
    _run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-parse_seqids", "-mask_data", masks,
          "-out", str(folder / "db")])
    return {"query": query, "db": str(folder / "db")}


@pytest.mark.parametrize("outfmt", ["6 std nident", "6 std nident sseq", "7 pident ppos",
                                    "0"])
def test_identities_across_a_hard_mask_as_blastn(across_a_mask, outfmt):
    """The traceback aligns the mask letter, so identities differ by the letters a report
    counts on: its alignment's (tabular without letters) or the true ones."""
    lines = same_as_blastn(across_a_mask["query"], across_a_mask["db"], "-db_hard_mask", DUST,
                           "-dust", "no", "-outfmt", outfmt)
    if outfmt.startswith("6"):
        identity = float(hit_lines(lines)[0].split("\t")[2])
        assert identity == 100.0 if "sseq" in outfmt else identity < 100.0


def test_sam_counts_the_hard_masked_alignment_as_blastn(across_a_mask):
    args = ["-query", across_a_mask["query"], "-db", across_a_mask["db"], "-db_hard_mask",
            DUST, "-dust", "no", "-outfmt", "17"]
    theirs = subprocess.run(["blastn", *args], capture_output=True, text=True, check=True)
    ours = gblastn("search", *args, "-device", "cpu")
    assert ours.returncode == 0, ours.stderr
    records = [[line for line in out.splitlines() if not line.startswith("@PG")]
               for out in (theirs.stdout, ours.stdout)]
    assert records[0] == records[1] and "PI:f:100.00" not in records[0][-1]


def test_a_name_that_is_no_id_searches_unmasked_with_blastns_warning(case):
    """blastn names the database as given in its warning."""
    args = ["-query", case["query"], "-db", case["dbs"]["one"], "-outfmt", "6",
            "-db_soft_mask", "dust"]
    theirs = subprocess.run(["blastn", *args], capture_output=True, text=True, check=True)
    ours = gblastn("search", *args, "-device", "cpu")
    assert ours.returncode == 0 and ours.stdout == theirs.stdout
    assert_blastn_found_hits(theirs.stdout)
    assert "Subject mask not found in" in theirs.stderr
    assert f"Warning: [blastn] Subject mask not found in {case['dbs']['one']}, proceeding " \
           "without subject masking." in ours.stderr


def test_refusals(case, tmp_path):
    plain = str(tmp_path / "plain")
    _run(["makeblastdb", "-in", case["fasta"], "-dbtype", "nucl", "-out", plain])
    for args, words in [
            (["-db", case["dbs"]["one"], "-db_soft_mask", "99"],
             f"Masking algorithm ID 99 is not supported in nucleotide '{case['dbs']['one']}' "
             "BLAST database"),
            (["-db", plain, "-db_soft_mask", DUST],
             f"Masking algorithm ID 11 is not supported in nucleotide '{plain}'"),
            (["-db", case["dbs"]["one"], "-db_hard_mask", "99"],
             "Masking algorithm ID 99 is not supported"),
            (["-db", case["dbs"]["one"], "-db_soft_mask", DUST, "-db_hard_mask", DUST],
             'Argument "db_soft_mask". Incompatible with argument:  `db_hard_mask\''),
            (["-subject", case["fasta"], "-db_soft_mask", DUST],
             'Argument "subject". Incompatible with argument:  `db_soft_mask\'')]:
        theirs = subprocess.run(["blastn", "-query", case["query"], *args],
                                capture_output=True, text=True)
        ours = gblastn("search", "-query", case["query"], *args, "-out", str(tmp_path / "o"))
        assert theirs.returncode != 0
        assert ours.returncode == 2 and ours.stdout == "", ours.stderr
        assert ours.stderr.startswith("gblastn: error: ") and words in ours.stderr
        assert len(ours.stderr.splitlines()) == 1 and not (tmp_path / "o").exists()
