"""Golden tests of taxonomy: -taxids, -negative_taxids, -taxidlist and -negative_taxidlist on
makeblastdb's databases made with -taxid or -taxid_map (version 5, one volume and several,
and sequences of several deflines) and on gblastn's own made the same way, and the columns
staxid, staxids and the taxonomy names, give blastn 2.12's output line for line; its
refusals are one-line errors."""

import subprocess

import numpy as np
import pytest

from golden import assert_blastn_found_hits, gblastn, hit_lines, mutate, needs_blast, \
    random_dna, same_as_blastn, write_fasta

pytestmark = [pytest.mark.golden, needs_blast]

# the id styles a -taxid_map names, each mapped (or not) by its own form of the id
DEFLINES = ["ref|NC_000001.1| refseq", "gb|AB000002.2| genbank", "lcl|local3 local",
            "gnl|hs|general4 general", "AB900009.1 bare", "gi|12345|gb|XY000007.1| with a gi",
            "plain7 no taxid", "gi|777 gi only"]
# (an accession matches whatever its case)
TAXID_MAP = ("NC_000001 9606\nab000002.2 10090\nlocal3 9606\ngnl|hs|general4 562\n"
             "AB900009 7227\n12345 10090\nnomatch 1\n777 4932\n")
TAX_COLUMNS = "staxid staxids sscinames scomnames sblastnames sskingdoms ssciname sskingdom"
FILTERS = {"-taxids": "9606, 562", "-negative_taxids": "10090,4932",
           "-taxidlist": "9606\n\n562\n", "-negative_taxidlist": "10090\r\n4932\n"}
NAMES_WARNING = "Taxonomy name lookup from taxid requires installation of taxdb database"


def _makeblastdb(fasta, out, *args) -> str:
    subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-out", str(out), *args],
                   check=True, capture_output=True)
    return str(out)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    folder = tmp_path_factory.mktemp("taxonomy")
    rng = np.random.default_rng(37)
    base = random_dna(rng, 10_000)
    records = [(line, mutate(rng, base[int(s):int(s) + 2_000], 0.04, 0.003))
               for line, s in zip(DEFLINES, rng.integers(0, 8_000, len(DEFLINES)))]
    fasta = write_fasta(folder / "db.fa", records)
    # a sequence of two deflines (^A between them), each with its own taxid
    multi = write_fasta(folder / "multi.fa", records[:2] + [
        ("lcl|twoA first\x01lcl|twoB second", mutate(rng, base[3_000:6_000], 0.02))])
    query = write_fasta(folder / "q.fa", [("q1", base[:10_000])])
    (folder / "map.txt").write_text(TAXID_MAP)
    (folder / "multi_map.txt").write_text("NC_000001 9606\ntwoA 562\ntwoB 9606\n")
    mapped = ["-parse_seqids", "-taxid_map", str(folder / "map.txt")]
    dbs = {"map": _makeblastdb(fasta, folder / "map", *mapped),
           "volumes": _makeblastdb(fasta, folder / "volumes", *mapped, "-max_file_sz", "3000"),
           "v4": _makeblastdb(fasta, folder / "v4", *mapped, "-blastdb_version", "4"),
           "one": _makeblastdb(fasta, folder / "one", "-taxid", "9606"),
           "plain": _makeblastdb(fasta, folder / "plain"),
           "multi": _makeblastdb(multi, folder / "multi", "-parse_seqids", "-taxid_map",
                                 str(folder / "multi_map.txt"))}
    ours = {name: folder / f"ours_{name}" for name in ("map", "one", "plain", "multi")}
    for name, (source, args) in {
            "map": (fasta, mapped), "one": (fasta, ["-taxid", "9606"]), "plain": (fasta, []),
            "multi": (multi, ["-parse_seqids", "-taxid_map", str(folder / "multi_map.txt")])
    }.items():
        done = gblastn("makedb", "-in", source, "-out", str(ours[name]), "-quiet", *args)
        assert done.returncode == 0, done.stderr
    lists = {}
    for number, (flag, text) in enumerate(FILTERS.items()):
        if flag.endswith("list"):
            (folder / f"list{number}.txt").write_text(text)
            text = str(folder / f"list{number}.txt")
        lists[flag] = text
    return {"folder": folder, "query": query, "dbs": dbs, "ours": ours, "lists": lists}


def _search(case, db, *args):
    return same_as_blastn(case["query"], db, *args)


@pytest.mark.parametrize("flag", list(FILTERS))
def test_the_filters_as_blastn(case, flag):
    outfmt = ["-outfmt", f"7 std {TAX_COLUMNS}"]
    everything = _search(case, case["dbs"]["map"], *outfmt)
    kept = _search(case, case["dbs"]["map"], flag, case["lists"][flag], *outfmt)
    assert_blastn_found_hits(kept)
    assert set(hit_lines(kept)) < set(hit_lines(everything))


@pytest.mark.parametrize("db", ["map", "volumes"])
@pytest.mark.parametrize("flag", ["-taxids", "-negative_taxids"])
def test_the_restricted_statistics_as_blastn(case, db, flag):
    """The pairwise report's search space counts the sequences kept, as -seqidlist's."""
    lines = _search(case, case["dbs"][db], flag, case["lists"][flag], "-task", "blastn")
    assert_blastn_found_hits([line for line in lines if line.startswith("Sequences producing")])


@pytest.mark.parametrize("db", ["map", "one", "plain", "v4"])
def test_the_taxonomy_columns_and_warning_as_blastn(case, db):
    """Without NCBI's name database the names are N/A, and both warn of it for the columns
    that blastn warns for."""
    args = ["-query", case["query"], "-db", case["dbs"][db], "-outfmt", f"6 saccver {TAX_COLUMNS}"]
    theirs = subprocess.run(["blastn", *args], capture_output=True, text=True)
    ours = gblastn("search", *args, "-device", "cpu")
    assert_blastn_found_hits(theirs.stdout)
    assert ours.stdout == theirs.stdout
    assert NAMES_WARNING in theirs.stderr and NAMES_WARNING in ours.stderr
    unnamed = gblastn("search", *args[:-1], "6 staxid staxids ssciname", "-device", "cpu")
    assert unnamed.returncode == 0 and NAMES_WARNING not in unnamed.stderr


@pytest.mark.parametrize("columns", ["saccver stitle staxid staxids sscinames",
                                     "saccver sscinames scomnames"])
@pytest.mark.parametrize("args", [[], ["-taxids", "9606"], ["-negative_taxids", "9606"]])
def test_a_sequence_of_several_deflines_as_blastn(case, args, columns):
    """staxids lists every defline's taxid; under a filter only the deflines of the taxids
    kept are shown; the names are N/A once a taxid beside staxids, else once."""
    lines = _search(case, case["dbs"]["multi"], *args, "-outfmt", f"6 {columns}")
    assert_blastn_found_hits(lines)
    if not args:
        assert any("N/A;N/A" in line for line in lines) == ("staxids" in columns)


@pytest.mark.parametrize("outfmt", ["15", "16"])
def test_the_taxid_of_json_and_xml2_reports_as_blastn(case, outfmt):
    _search(case, case["dbs"]["map"], "-outfmt", outfmt, "-negative_taxids", "7227")


@pytest.mark.parametrize("db,args", [
    ("map", ["-taxids", "9606,562"]), ("map", ["-negative_taxids", "10090,4932"]),
    ("one", ["-taxids", "9606", "-task", "blastn"]), ("plain", ["-taxids", "0"]),
    ("map", ["-outfmt", "15"]), ("plain", ["-outfmt", "15"]), ("multi", []),
    ("multi", ["-taxids", "9606"]), ("multi", ["-negative_taxids", "9606"]),
    ("multi", ["-outfmt", "15"])])
def test_a_gblastn_database_with_taxids_as_blastn(case, db, args):
    """makedb -taxid_map finds each id's taxid as makeblastdb does (the map's form of an id
    and the defline's differ), each defline its own; -taxid gives all the one; a database
    without has 0."""
    if "-outfmt" not in args:
        args += ["-outfmt", f"7 saccver {TAX_COLUMNS}"]
    lines = same_as_blastn(case["query"], case["dbs"][db], *args, ours_db=str(case["ours"][db]))
    if "15" in args:
        assert any('"description"' in line for line in lines)
    else:
        assert_blastn_found_hits(lines)


def _refused_as_blastn(args, code, words, out):
    theirs = subprocess.run(["blastn", *args], capture_output=True, text=True)
    ours = gblastn("search", *args, "-out", str(out))
    assert theirs.returncode != 0
    assert ours.returncode == code and ours.stdout == "", ours.stderr
    assert ours.stderr.startswith("gblastn: error: ") and words in ours.stderr
    assert len(ours.stderr.splitlines()) == 1 and not out.exists()


def test_refusals(case, tmp_path):
    query, dbs = case["query"], case["dbs"]
    (tmp_path / "bad.txt").write_text("9606\n#9606\n")
    for args, code, words in [
            (["-db", dbs["v4"], "-taxids", "9606"], 3, "not supported in v4 BLAST dbs"),
            (["-db", dbs["map"], "-taxids", "1234"], 3, "Taxonomy ID(s) not found"),
            (["-db", dbs["plain"], "-taxids", "9606"], 3, "Taxonomy ID(s) not found"),
            (["-db", dbs["map"], "-negative_taxids", "1234"], 3, "Taxonomy ID(s) not found"),
            (["-db", dbs["map"], "-taxids", "9606 562"], 2, "Invalid taxidlist file"),
            (["-db", dbs["map"], "-taxidlist", str(tmp_path / "bad.txt")], 2,
             "Invalid taxidlist file"),
            (["-db", dbs["map"], "-taxidlist", str(tmp_path / "none")], 2,
             "cannot read the taxidlist"),
            (["-db", dbs["map"], "-taxids", "1", "-negative_taxids", "2"], 2,
             'Argument "taxids". Incompatible with argument:  `negative_taxids\''),
            (["-db", dbs["map"], "-negative_taxidlist", "x", "-seqidlist", "x"], 2,
             'Argument "seqidlist". Incompatible with argument:  `negative_taxidlist\''),
            (["-subject", str(case["folder"] / "db.fa"), "-taxids", "1"], 2,
             'Argument "taxids". Incompatible with argument:  `subject\'')]:
        _refused_as_blastn(["-query", query, *args], code, words, tmp_path / "out.txt")


def test_makedb_refusals(case, tmp_path):
    fasta, taxid_map = str(case["folder"] / "db.fa"), str(case["folder"] / "map.txt")
    (tmp_path / "bad_map.txt").write_text("local3 9606\nplain7 many\n")
    for args, words in [
            (["-taxid_map", taxid_map], 'Argument "parse_seqids". Must be specified'),
            (["-parse_seqids", "-taxid", "1", "-taxid_map", taxid_map],
             'Argument "taxid_map". Incompatible with argument:  `taxid\''),
            (["-taxid", "-5"], 'Argument "taxid". Illegal value, expected >=0'),
            (["-parse_seqids", "-taxid_map", str(tmp_path / "none")], "cannot read"),
            (["-parse_seqids", "-taxid_map", str(tmp_path / "bad_map.txt")],
             "bad_map.txt:2: taxid 'many' is not an integer")]:
        done = gblastn("makedb", "-in", fasta, "-out", str(tmp_path / "db"), *args)
        theirs = subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-out",
                                 str(tmp_path / "theirs"), *args], capture_output=True)
        assert theirs.returncode != 0
        assert done.returncode == 2 and words in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1 and not (tmp_path / "db.gdb").exists()


def test_makedb_warns_when_the_map_names_no_sequence(case, tmp_path):
    (tmp_path / "map.txt").write_text("nomatch 9606\n")
    done = gblastn("makedb", "-in", str(case["folder"] / "db.fa"), "-out", str(tmp_path / "db"),
                   "-parse_seqids", "-taxid_map", str(tmp_path / "map.txt"))
    assert done.returncode == 0
    assert "No sequences matched any of the taxids provided." in done.stderr
