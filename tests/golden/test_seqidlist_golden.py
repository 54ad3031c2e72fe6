"""Golden tests of -seqidlist and -negative_seqidlist: searches of makeblastdb's databases
(version 5 and 4, one volume and several) and of gblastn's own restricted to the sequences a
list names, text or blastdb_aliastool's binary form, give blastn 2.12's output line for line,
the statistics of the restricted database included."""

import subprocess

import numpy as np
import pytest

from golden import assert_blastn_found_hits, gblastn, mutate, needs_blast, random_dna, \
    same_as_blastn, write_fasta

pytestmark = [pytest.mark.golden, needs_blast]

# one id style per sequence: each is named in a list by its accession, its bare form or not
# at all (a GI)
DEFLINES = ["ref|NC_000001.1| refseq", "gb|AB000002.2| genbank", "lcl|local3 local",
            "gnl|hs|general4 general", "pdb|1XYZ|B pdb chain", "sp|P12345.1|NAME_X swissprot",
            "gi|12345|gb|XY000007.1| with a gi", "emb|CAA00008.3| embl", "AB900009.1 bare",
            "gi|777 gi only"]
LISTS = {
    "accessions": "NC_000001.1\nAB000002.2\n",
    "with a gi's": "XY000007.1\nAB000002.2\n",
    "without versions": "NC_000001\nP12345\nXY000007\n",
    "a wrong version": "NC_000001.2\nCAA00008.3\n",
    "fasta ids": "lcl|local3\ngnl|hs|general4\npdb|1XYZ|B\nref|NC_000001.1|\n",
    "their short forms": "local3\nhs:general4\n1XYZ_B\n",
    "gis name nothing": "12345\ngi|777\ngi|12345|gb|XY000007.1|\nAB900009\n",
    "words, blanks, '>'": ">NC_000001.1 the first\n\n  emb|CAA00008.3|\tthe eighth\nnc_000001.1\n",
    "names nothing": "bogus\n",
    # a local id is named by its name as written, bare or lcl|name| only
    "a local id's case and types": "LOCAL3\nemb|local3|\ngb|local3\n",
    "a local id with a closing bar": "lcl|local3|\n",
    "blank lines": "\n  \n",  # no ids: no restriction
}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    folder = tmp_path_factory.mktemp("seqidlist")
    rng = np.random.default_rng(11)
    base = random_dna(rng, 12_000)
    records = [(line, mutate(rng, base[int(s):int(s) + int(n)], 0.04, 0.003))
               for line, s, n in zip(DEFLINES, rng.integers(0, 6_000, len(DEFLINES)),
                                     rng.integers(1_500, 5_000, len(DEFLINES)))]
    fasta = write_fasta(folder / "db.fa", records)
    query = write_fasta(folder / "q.fa", [("q1 one", base[1_000:4_000]),
                                          ("q2 two", mutate(rng, base[5_000:9_000], 0.1))])
    dbs = {}
    for name, args in {"v5": [], "v4": ["-blastdb_version", "4"],
                       "volumes": ["-max_file_sz", "3000"]}.items():
        subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-parse_seqids",
                        "-out", str(folder / name), *args], check=True, capture_output=True)
        dbs[name] = str(folder / name)
    done = gblastn("makedb", "-in", fasta, "-out", str(folder / "ours"), "-parse_seqids",
                   "-quiet")
    assert done.returncode == 0, done.stderr
    lists = {}
    for number, (name, text) in enumerate(LISTS.items()):
        lists[name] = folder / f"list{number}.txt"
        lists[name].write_text(text)
    return {"folder": folder, "query": query, "dbs": dbs, "lists": lists}


@pytest.mark.parametrize("flag", ["-seqidlist", "-negative_seqidlist"])
@pytest.mark.parametrize("listed", list(LISTS))
def test_the_listed_ids_as_blastn(case, listed, flag):
    same_as_blastn(case["query"], case["dbs"]["v5"], flag, str(case["lists"][listed]), "-outfmt",
                    "7 std score")


@pytest.mark.parametrize("db,listed", [("v5", "accessions"), ("v5", "without versions"),
                                       ("v5", "with a gi's"), ("volumes", "with a gi's"),
                                       ("volumes", "accessions"),
                                       ("volumes", "without versions"), ("v4", "accessions")])
@pytest.mark.parametrize("flag", ["-seqidlist", "-negative_seqidlist"])
def test_the_restricted_statistics_as_blastn(case, db, flag, listed):
    """The pairwise report's search space is the restricted database's, its footer the
    whole database's; several volumes count each sequence by its place in its volume.
    (Version 4's statistics under a negative list of ids without versions differ: not
    matched.)"""
    lines = same_as_blastn(case["query"], case["dbs"][db], flag, str(case["lists"][listed]),
                            "-task", "blastn")
    assert_blastn_found_hits([line for line in lines if line.startswith("Sequences producing")])


@pytest.fixture(scope="module")
def names_alone(case):
    """A database of ids that give a name without an accession (pir||NAME, prf||NAME)."""
    rng = np.random.default_rng(13)
    records = [(title, random_dna(rng, 600)) for title in
               ("pir||ABCDEF pir title", "prf||XYZ12 prf title", "gb|AB000002.2| genbank")]
    fasta = write_fasta(case["folder"] / "names.fa", records)
    query = write_fasta(case["folder"] / "names_q.fa",
                        [(f"q{k}", letters[50:450]) for k, (_, letters) in enumerate(records)])
    db = str(case["folder"] / "names")
    subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-parse_seqids", "-out", db],
                   check=True, capture_output=True)
    listed = case["folder"] / "names_list.txt"
    listed.write_text("pir||ABCDEF\nXYZ12\n")
    return {"db": db, "query": query, "list": str(listed)}


@pytest.mark.parametrize("args", [["-outfmt", "6 qseqid sseqid sacc saccver sallacc sallseqid"],
                                  ["-outfmt", "0"], ["-outfmt", "0", "-show_gis"],
                                  ["-outfmt", "5"], ["-seqidlist"], ["-negative_seqidlist"]])
def test_a_name_without_an_accession_as_blastn(names_alone, args):
    """pir||NAME stands for its accession in the accession columns, shows whole in the
    pairwise titles, and a list names it in that form."""
    if args[0].endswith("seqidlist"):
        args = [*args, names_alone["list"], "-outfmt", "6 qseqid sseqid evalue"]
    lines = same_as_blastn(names_alone["query"], names_alone["db"], *args)
    assert any("ABCDEF" in line for line in lines) != (args[0] == "-negative_seqidlist")


def test_the_binary_list_as_blastn(case):
    binary = case["folder"] / "list.bsl"
    subprocess.run(["blastdb_aliastool", "-seqid_file_in", str(case["lists"]["fasta ids"]),
                    "-seqid_file_out", str(binary)], check=True, capture_output=True)
    for outfmt in ("0", "7 std score"):
        same_as_blastn(case["query"], case["dbs"]["v5"], "-seqidlist", str(binary), "-outfmt", outfmt)


@pytest.mark.parametrize("flag", ["-seqidlist", "-negative_seqidlist"])
def test_a_gblastn_database_restricted_as_blastn(case, flag):
    same_as_blastn(case["query"], case["dbs"]["v5"], flag, str(case["lists"]["without versions"]),
                    ours_db=str(case["folder"] / "ours"))


@pytest.mark.parametrize("outfmt", ["0", "6", "5", "15"])
@pytest.mark.parametrize("masking", ["true", "false"])
@pytest.mark.parametrize("flag,listed", [("-seqidlist", "names nothing"),
                                         ("-negative_seqidlist", "every accession")])
def test_a_list_leaving_no_sequence_as_blastn(case, flag, listed, masking, outfmt, tmp_path):
    """A list that leaves no sequence: each query warned of it (joined to its own warning
    of no letters or no statistics) on stderr, or in the XML and JSON messages; the search
    space that of the database's first sequence alone. (A negative list naming every
    accession leaves the sequence known by its GI alone in the statistics: no warning.)"""
    every = tmp_path / "every.txt"
    every.write_text("".join(line.split("|")[1] + "\n" for line in DEFLINES[:2]) +
                     "local3\nhs:general4\n1XYZ_B\nP12345.1\nXY000007.1\nCAA00008.3\n"
                     "AB900009.1\n")
    queries = tmp_path / "queries.fa"
    first, second = open(case["query"]).read().split(">")[1:]
    queries.write_text(">all n\n" + "N" * 60 + "\n>" + first + ">empty\n>" + second)
    listed_file = str(every if listed == "every accession" else case["lists"][listed])
    args = [flag, listed_file, "-task", "blastn", "-soft_masking", masking, "-outfmt", outfmt]
    lines = same_as_blastn(str(queries), case["dbs"]["v5"], *args)
    advice = "blastdb_aliastool"  # blastn's advice for text lists, not copied
    theirs = subprocess.run(["blastn", "-query", str(queries), "-db", case["dbs"]["v5"], *args],
                            capture_output=True, text=True).stderr
    ours = gblastn("search", "-query", str(queries), "-db", case["dbs"]["v5"], "-device", "cpu",
                   *args).stderr
    assert [line for line in theirs.splitlines() if advice not in line] == ours.splitlines()
    said = theirs + "".join(lines)
    emptied = flag == "-seqidlist"
    assert said.count("Filtering resulted in an empty database.") == (4 if emptied else 0)
    if outfmt == "0" and emptied:  # the valid queries' spaces: the first sequence's
        assert any(line.startswith("Effective search space used: ") and
                   not line.endswith(": 0") for line in lines)


def test_refusals(case, tmp_path):
    plain = str(tmp_path / "plain")
    subprocess.run(["makeblastdb", "-in", str(case["folder"] / "db.fa"), "-dbtype", "nucl",
                    "-out", plain], check=True, capture_output=True)
    listed = str(case["lists"]["accessions"])
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    for args, code, words in [
            (["-db", plain, "-seqidlist", listed], 3, "no accession info"),
            (["-db", case["dbs"]["v5"], "-seqidlist", str(tmp_path / "none")], 2,
             "cannot read the seqidlist"),
            (["-db", case["dbs"]["v5"], "-negative_seqidlist", str(empty)], 2,
             "Failed to map seqidlist file"),
            (["-db", case["dbs"]["v5"], "-seqidlist", listed, "-negative_seqidlist", listed],
             2, "Incompatible with argument:  `negative_seqidlist'"),
            (["-subject", str(case["folder"] / "db.fa"), "-seqidlist", listed], 2,
             "Incompatible with argument:  `seqidlist'")]:
        theirs = subprocess.run(["blastn", "-query", case["query"], *args],
                                capture_output=True, text=True)
        ours = gblastn("search", "-query", case["query"], *args)
        assert theirs.returncode != 0
        assert ours.returncode == code and ours.stdout == ""
        assert ours.stderr.startswith("gblastn: error: ") and words in ours.stderr
