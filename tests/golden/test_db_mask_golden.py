"""Golden tests of -db_soft_mask and -db_hard_mask: a BLAST+ database made with masking data
(dustmasker's and windowmasker's, makeblastdb -mask_data) is searched without seeds in the
masked ranges of its sequences, extensions going through them (soft) or each unmasked range
searched apart and the masked letters aligned as blastn's mask letter (hard), as blastn 2.12
searches it: the same hits for every task, one volume or several, identities counted on the
letters each report reads, and the pairwise report's masked subject letters in lower case
under its 'Masked using' lines. A gblastn database made from the same masking data (makedb
-mask_data) is searched as blastn searches makeblastdb's."""

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
    dust_text = str(folder / "dust.asnt")  # the text form, without parsed ids
    _run(["dustmasker", "-in", fasta, "-outfmt", "maskinfo_asn1_text", "-out", dust_text])
    dbs = {}
    for name, args in {"one": [], "volumes": ["-max_file_sz", "6000"]}.items():
        _run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-parse_seqids", "-mask_data",
              f"{dust},{windows}", "-out", str(folder / name), *args])
        dbs[name] = str(folder / name)
    _run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-mask_data", dust_text, "-out",
          str(folder / "text")])
    dbs["text"] = str(folder / "text")
    ours = {}
    for name, args in {"one": ["-parse_seqids", "-mask_data", f"{dust},{windows}"],
                       "volumes": ["-parse_seqids", "-mask_data", f"{dust},{windows}",
                                   "-max_file_sz", "6000"],
                       "text": ["-mask_data", dust_text]}.items():
        made = gblastn("makedb", "-in", fasta, "-out", str(folder / f"ours_{name}"), "-quiet",
                       *args)
        assert made.returncode == 0, made.stderr
        ours[name] = str(folder / f"ours_{name}")
    return {"folder": folder, "fasta": fasta, "query": query, "dbs": dbs, "ours": ours,
            "dust": dust, "windows": windows}


def _without_dates(lines: list) -> list:
    return [line for line in lines if not line.startswith("    Posted date:")]


@pytest.mark.parametrize("db", ["one", "volumes", "text"])
@pytest.mark.parametrize("task", ["megablast", "blastn"])
@pytest.mark.parametrize("mask", ["-db_soft_mask", "-db_hard_mask"])
def test_a_gblastn_database_with_masking_data_as_blastn(case, db, task, mask):
    """makedb -mask_data stores makeblastdb's masks under its algorithm ids: the searches of
    both databases are the same, and the masks change them."""
    algorithms = [DUST] if db == "text" else [DUST, WINDOWMASKER]
    args = ["-task", task, "-dust", "no", "-outfmt", "6 std score"]
    for algorithm in algorithms:
        masked = same_as_blastn(case["query"], case["dbs"][db], *args, mask, algorithm,
                                ours_db=case["ours"][db])
        assert_blastn_found_hits(masked)
        unmasked = gblastn("search", "-query", case["query"], "-db", case["ours"][db],
                           "-device", "cpu", *args)
        assert hit_lines(unmasked.stdout) != hit_lines(masked)


@pytest.mark.parametrize("mask", ["-db_soft_mask", "-db_hard_mask"])
def test_a_gblastn_databases_pairwise_report_as_blastn(case, mask):
    """Its 'Masked using' lines name the algorithm; the build dates differ."""
    args = ["-query", case["query"], "-dust", "no", mask, DUST]
    theirs = subprocess.run(["blastn", *args, "-db", case["dbs"]["one"]], capture_output=True,
                            text=True, check=True)
    ours = gblastn("search", *args, "-db", case["ours"]["one"], "-device", "cpu")
    assert ours.returncode == 0, ours.stderr
    got = [line.replace(case["ours"]["one"], case["dbs"]["one"])
           for line in ours.stdout.splitlines()]
    assert _without_dates(got) == _without_dates(theirs.stdout.splitlines())
    assert sum(line.lstrip().startswith("Masked using: 'dust'") for line in got) == 2


def test_a_gblastn_database_refuses_an_algorithm_it_lacks_as_blastn(case, tmp_path):
    for db, algorithm in [(case["ours"]["one"], "99"), (case["ours"]["text"], WINDOWMASKER)]:
        ours = gblastn("search", "-query", case["query"], "-db", db, "-db_soft_mask", algorithm,
                       "-out", str(tmp_path / "o"))
        assert ours.returncode == 2 and ours.stdout == ""
        assert ours.stderr == (f"gblastn: error: Masking algorithm ID {algorithm} is not "
                               f"supported in nucleotide '{db}' BLAST database\n")


def test_mask_ids_as_makeblastdbs(case, tmp_path):
    """-mask_id names each file's algorithm and numbers them from 100, in either database."""
    names = ["-mask_data", f"{case['dust']},{case['windows']}", "-mask_id", "mine,yours"]
    _run(["makeblastdb", "-in", case["fasta"], "-dbtype", "nucl", "-parse_seqids", *names,
          "-out", str(tmp_path / "theirs")])
    made = gblastn("makedb", "-in", case["fasta"], "-parse_seqids", *names, "-quiet", "-out",
                   str(tmp_path / "ours"))
    assert made.returncode == 0, made.stderr
    for algorithm in ("100", "101"):
        lines = same_as_blastn(case["query"], str(tmp_path / "theirs"), "-dust", "no",
                               "-db_soft_mask", algorithm, "-outfmt", "6 std")
        assert_blastn_found_hits(lines)
        assert lines == same_as_blastn(case["query"], str(tmp_path / "theirs"), "-dust", "no",
                                       "-db_soft_mask", algorithm, "-outfmt", "6 std",
                                       ours_db=str(tmp_path / "ours"))
    args = ["-query", case["query"], "-dust", "no", "-db_hard_mask", "100"]
    theirs = subprocess.run(["blastn", *args, "-db", str(tmp_path / "theirs")],
                            capture_output=True, text=True, check=True)
    for db in ("theirs", "ours"):
        ours = gblastn("search", *args, "-db", str(tmp_path / db), "-device", "cpu")
        got = [line.replace(str(tmp_path / db), str(tmp_path / "theirs"))
               for line in ours.stdout.splitlines()]
        assert _without_dates(got) == _without_dates(theirs.stdout.splitlines())
    assert "Masked using: 'mine', options: 'window=64; level=20; linker=1'" in theirs.stdout


@pytest.mark.parametrize("content, words", [
    (b"", "Unknown encoding for mask data in"),
    (b"<?xml version=\"1.0\"?>\n<Blast-db-mask-info/>\n", "Unknown encoding for mask data in"),
    (b"\x30\x80\xa0\x80\x02\x01", "damaged mask data"),
    (b"Blast-db-mask-info ::= { algo-id 2, algo-program dust,", "damaged mask data")])
def test_bad_mask_data_leaves_the_database_as_it_was(case, tmp_path, content, words):
    bad = tmp_path / "bad.asn"
    bad.write_bytes(content)
    out = str(tmp_path / "db")
    first = gblastn("makedb", "-in", case["fasta"], "-out", out, "-quiet")
    assert first.returncode == 0
    before = (tmp_path / "db.gdb" / "manifest.json").read_bytes()
    for masks in (str(bad), f"{case['dust']},{bad}", str(tmp_path / "missing.asn")):
        made = gblastn("makedb", "-in", case["fasta"], "-out", out, "-parse_seqids",
                       "-mask_data", masks)
        assert made.returncode == 2 and made.stdout == ""
        assert made.stderr.startswith("gblastn: error: ") and len(made.stderr.splitlines()) == 1
        assert (words if masks != str(tmp_path / "missing.asn") else "cannot read") \
            in made.stderr
        assert (tmp_path / "db.gdb" / "manifest.json").read_bytes() == before
        assert len(list((tmp_path / "db.gdb").iterdir())) == 2  # the manifest, its generation


def test_makeblastdbs_refusals_of_mask_data(case, tmp_path):
    windows2 = tmp_path / "wm2.asnb"
    windows2.write_bytes(open(case["windows"], "rb").read())
    for masks, words in [(f"{case['dust']},{case['dust']}", "Duplicate masking algorithm found."),
                         (f"{case['windows']},{windows2}",
                          "Masking algorithm with default arguments already provided")]:
        theirs = subprocess.run(["makeblastdb", "-in", case["fasta"], "-dbtype", "nucl",
                                 "-parse_seqids", "-mask_data", masks, "-out",
                                 str(tmp_path / "theirs")], capture_output=True, text=True)
        assert words in theirs.stdout + theirs.stderr
        ours = gblastn("makedb", "-in", case["fasta"], "-parse_seqids", "-mask_data", masks,
                       "-out", str(tmp_path / "ours"))
        assert ours.returncode == 2 and ours.stderr == f"gblastn: error: {words}\n"
        assert not (tmp_path / "ours.gdb").exists()


def test_masks_no_sequence_matches_are_not_stored_with_makeblastdbs_warning(case, tmp_path):
    """Ids parsed by the masker but not by the build (or the other way): no masks, as
    makeblastdb stores none."""
    made = gblastn("makedb", "-in", case["fasta"], "-mask_data", case["dust"], "-out",
                   str(tmp_path / "ours"))
    assert made.returncode == 0
    assert "No sequences matched any of the masks provided." in made.stderr
    ours = gblastn("search", "-query", case["query"], "-db", str(tmp_path / "ours"),
                   "-db_soft_mask", DUST)
    assert ours.returncode == 2 and "Masking algorithm ID 11 is not supported" in ours.stderr


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


def _stored_ranges(db_name: str) -> list:
    """Every sequence's ranges of every algorithm, as gblastn reads them from either kind of
    database."""
    from gblastn.db.blast_masks import volume_masks
    from gblastn.db.reader import open_db

    with open_db(db_name) as db:
        found = []
        for volume in db.volumes:
            masks = volume_masks(volume, db)
            found += [{algorithm_id: masks.ranges(local, algorithm_id).tolist()
                       for algorithm_id in sorted(masks.algorithms)}
                      for local in range(volume.num_seqs)]
        return [sorted(masks.algorithms.values())] + found


def test_the_stored_ranges_are_makeblastdbs(tmp_path):
    """Sequences named by their place in their file without -parse_seqids (records without
    letters counted), intervals, lists and mixes of them, a sequence named twice (its
    ranges merged), in text ASN.1 as in BER."""
    rng = np.random.default_rng(3)
    first = write_fasta(tmp_path / "a.fa", [("a1", random_dna(rng, 500)), ("empty", ""),
                                            ("a3", random_dna(rng, 400))])
    second = write_fasta(tmp_path / "b.fa", [("b1", random_dna(rng, 300)),
                                             ("b2", random_dna(rng, 300))])
    masks = tmp_path / "masks.asnt"
    masks.write_text("""Blast-db-mask-info ::= {
  algo-id 2,
  algo-program dust,
  algo-options "level=9",
  masks {
    masks {
      int { from 10, to 19, id local id 1 },
      packed-int { { from 5, to 9, id local id 3 }, { from 100, to 119, id local id 3 } },
      mix { int { from 40, to 40, id local id 1 }, packed-int { { from 30, to 39,
            id local id 1 } } },
      packed-int { { from 20, to 29, id local id 1 }, { from 200, to 299, id local id 1 } }
    },
    more FALSE
  }
}
""")
    _run(["makeblastdb", "-in", f"{first} {second}", "-dbtype", "nucl", "-mask_data",
          str(masks), "-out", str(tmp_path / "theirs")])
    made = gblastn("makedb", "-in", f"{first} {second}", "-mask_data", str(masks), "-quiet",
                   "-out", str(tmp_path / "ours"))
    assert made.returncode == 0, made.stderr
    theirs = _stored_ranges(str(tmp_path / "theirs"))
    assert theirs == _stored_ranges(str(tmp_path / "ours"))
    named_first = {11: [[10, 41], [200, 300]]}  # a1 and b1, each its file's first record
    assert theirs[1:] == [named_first, {11: [[5, 10], [100, 120]]}, named_first, {11: []}]


def test_dbinfo_lists_the_algorithms_as_blastdbcmd(case):
    theirs = subprocess.run(["blastdbcmd", "-db", case["dbs"]["one"], "-info"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    ours = gblastn("dbinfo", "-db", case["ours"]["one"]).stdout.splitlines()
    table = theirs.index("Available filtering algorithms applied to database sequences:")
    assert ours[ours.index(theirs[table]):][:5] == theirs[table:table + 5]


# ids of every kind -parse_seqids reads (NCBI's rules give makeblastdb's masks to none of
# a nucleotide database's sequences with a protein accession: sp|, or emb|CAA...)
PARSED_IDS = ["gi|1001|gb|AB000001.1| a", "ref|NM_000001.2| b", "NC_000002.1 bare refseq",
              "AB000003 bare", "lcl|loc4 c", "gnl|mydb|tag5 d", "pdb|1ABC|A e",
              "emb|AJ000006.1| f", "dbj|AB000007.1| g", "gb|AF000008| no version",
              "plainname9 h", "12345 numeric", "tpg|BK000014.1| j"]


@pytest.mark.parametrize("outfmt", ["maskinfo_asn1_bin", "maskinfo_asn1_text"])
def test_sequences_named_by_parsed_ids_get_makeblastdbs_ranges(tmp_path, outfmt):
    rng = np.random.default_rng(9)
    fasta = write_fasta(tmp_path / "ids.fa", [
        (name, np.concatenate([random_dna(rng, 100), _low_complexity(rng, 80),
                               random_dna(rng, 200), _low_complexity(rng, 60),
                               random_dna(rng, 100)])) for name in PARSED_IDS])
    masks = str(tmp_path / "masks")
    _run(["dustmasker", "-in", fasta, "-parse_seqids", "-outfmt", outfmt, "-out", masks])
    _run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-parse_seqids", "-mask_data", masks,
          "-out", str(tmp_path / "theirs")])
    made = gblastn("makedb", "-in", fasta, "-parse_seqids", "-mask_data", masks, "-quiet",
                   "-out", str(tmp_path / "ours"))
    assert made.returncode == 0, made.stderr
    theirs = _stored_ranges(str(tmp_path / "theirs"))
    assert theirs == _stored_ranges(str(tmp_path / "ours"))
    assert all(found[11] for found in theirs[1:])
