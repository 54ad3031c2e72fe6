"""Golden tests: searches of databases built by makeblastdb (versions 4 and 5, with and
without -parse_seqids, several volumes, alias files, several databases in one -db) give
blastn's output line for line, and dbcmd prints what blastdbcmd prints."""

import shutil
import subprocess

import numpy as np
import pytest

from golden import assert_blastn_found_hits, blastn, compare_lines, flags, gblastn, lower, \
    mutate, random_dna, revcomp, needs_blast, run_ours, sprinkle, write_fasta

pytestmark = [pytest.mark.golden, needs_blast]

PIECE = 10_000
# deflines of every kind makeblastdb -parse_seqids reads, n a piece's number
ID_STYLES = ("gi|{n}000|gb|AB{n:06d}.1| genbank piece", "ref|NC_{n:06d}.2| refseq piece",
             "lcl|piece{n} local piece", "gnl|hs|p{n} general piece",
             "emb|CAA{n:05d}.1| embl piece", "AB9{n:05d}.3 bare accession piece",
             "piece{n}", "pdb|{d}XY{n:01d}|B pdb piece", "sp|P{n:05d}.1|NAME_{n} swissprot piece")
COLUMNS_7 = ("7 qseqid sseqid sacc saccver sallseqid sgi stitle salltitles slen qstart qend "
             "sstart send evalue bitscore score length nident mismatch gaps gapopen btop "
             "qseq sseq")
COLUMNS_6 = ("6 qaccver saccver stitle slen pident length qstart qend sstart send evalue "
             "bitscore sstrand")


def _chromosome() -> np.ndarray:
    with open("db/HS11286_chr_1-300000.fa", "rb") as handle:
        lines = handle.read().split(b"\n")
    return np.frombuffer(b"".join(line.strip() for line in lines[1:]), dtype=np.uint8)


def _defline(n: int) -> str:
    return ID_STYLES[n % len(ID_STYLES)].format(n=n, d=1 + n % 9)


def _pieces(rng) -> list:
    """The chromosome in pieces, some with ambiguity codes, N runs (one longer than
    makeblastdb's runs: the long-run format) and lower case."""
    chromosome = _chromosome()
    pieces = [chromosome[i:i + PIECE].copy() for i in range(0, chromosome.size, PIECE)]
    pieces[3] = sprinkle(rng, pieces[3], n_runs=4, n_iupac=200)
    pieces[7][2000:7000] = ord("N")
    pieces[11] = lower(pieces[11], 1000, 6000)
    iupac_heavy = pieces[12].copy()
    iupac_heavy[1000:3000:7] = np.frombuffer(b"RYKMSWBDHV" * 29, dtype=np.uint8)[:286]
    pieces[12] = iupac_heavy
    return pieces


def _extra_subjects(rng, pieces) -> list:
    """A second database: copies of stretches of the first, with ambiguity codes."""
    return [("xa|1| first extra", sprinkle(rng, mutate(rng, pieces[3][:6000], 0.02), 3, 60)),
            ("extra2 second extra", mutate(rng, pieces[20], 0.05, 0.005)),
            ("extra3 third extra", sprinkle(rng, pieces[12][500:4000], 2, 100, (20, 60)))]


def _queries(rng, pieces) -> list:
    return [("q1 over the ambiguity codes", mutate(rng, pieces[3][1000:4000], 0.02, 0.002)),
            ("q2 across two pieces", np.concatenate([pieces[4][8000:], pieces[5][:2500]])),
            ("q3 minus strand", revcomp(mutate(rng, pieces[9][3000:5000], 0.03))),
            ("q4 the IUPAC-heavy stretch", mutate(rng, pieces[12][500:3800], 0.01)),
            ("q5 beside the long N run", pieces[7][500:2600]),
            ("q6 lower case subject", mutate(rng, pieces[11][800:3300], 0.04, 0.004)),
            ("q7 with its own N", sprinkle(rng, pieces[20][100:2100], 1, 10)),
            ("q8 diverged", mutate(rng, pieces[25][:3000], 0.15, 0.01))]


def _makeblastdb(fasta, out, *args):
    subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-out", out, *args],
                   check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{name: -db value} of every database kind, the query files and the folder."""
    folder = tmp_path_factory.mktemp("blastdb")
    rng = np.random.default_rng(11)
    pieces = _pieces(rng)
    records = [(_defline(n), piece) for n, piece in enumerate(pieces)]
    main = write_fasta(folder / "pieces.fa", records)
    extra = write_fasta(folder / "extra.fa", _extra_subjects(rng, pieces))
    queries = write_fasta(folder / "queries.fa", _queries(rng, pieces))
    d = str(folder)
    dbs = {
        "v5": _makeblastdb(main, f"{d}/v5/hs"),
        "v5_parse_seqids": _makeblastdb(main, f"{d}/v5p/hs", "-parse_seqids"),
        "v4": _makeblastdb(main, f"{d}/v4/hs", "-blastdb_version", "4"),
        "v4_parse_seqids": _makeblastdb(main, f"{d}/v4p/hs", "-blastdb_version", "4",
                                        "-parse_seqids"),
        "volumes_v5": _makeblastdb(main, f"{d}/mv5/hs", "-max_file_sz", "30000"),
        "volumes_v4_parse_seqids": _makeblastdb(main, f"{d}/mv4/hs", "-max_file_sz", "30000",
                                                "-blastdb_version", "4", "-parse_seqids"),
    }
    extra_db = _makeblastdb(extra, f"{d}/extra/x")
    dbs["two_databases"] = f"{dbs['volumes_v5']} {extra_db}"
    # made with and without -parse_seqids, either way round; blastn 2.12 fails ("Error
    # pre-fetching sequence data") where both have hits, so the parsed one has none
    plain = write_fasta(folder / "plain.fa", [(f"plain{n} title", piece)
                                              for n, piece in enumerate(pieces[::4])])
    parsed = write_fasta(folder / "parsed.fa", [(f"ref|NC_{n:06d}.1| parsed title",
                                                 random_dna(rng, 3000)) for n in range(5)])
    plain_db = _makeblastdb(plain, f"{d}/plain/plain")
    parsed_db = _makeblastdb(parsed, f"{d}/parsed/parsed", "-parse_seqids")
    dbs["parsed_then_not"] = f"{parsed_db} {plain_db}"
    dbs["not_then_parsed"] = f"{plain_db} {parsed_db}"
    # the same sequences under other ids, named before the database whose file name sorts
    # first: their ties follow SeqDB's volume order, not the -db value's
    twins = [write_fasta(folder / f"{name}.fa", [(f"ref|{prefix}_{n:06d}.1| twin", piece)
                                                 for n, piece in enumerate(pieces[:6])])
             for name, prefix in (("zz", "NC"), ("aa", "NG"))]
    dbs["ties_named_backwards"] = " ".join(
        _makeblastdb(fasta, f"{d}/{name}/{name}", "-parse_seqids")
        for fasta, name in zip(twins, ("zz", "aa")))
    with open(f"{d}/hand.nal", "w") as handle:  # with the size E-values are computed for
        handle.write("# by hand\nTITLE hand made\nDBLIST mv5/hs \"extra/x\"\n"
                     "NSEQ 5000\nLENGTH 50000000\n")
    dbs["alias_by_hand"] = f"{d}/hand"
    if shutil.which("blastdb_aliastool"):
        subprocess.run(["blastdb_aliastool", "-dblist", f"{dbs['v5']} {extra_db}",
                        "-dbtype", "nucl", "-out", f"{d}/tool", "-title", "by the tool"],
                       check=True, capture_output=True)
        dbs["alias_by_aliastool"] = f"{d}/tool"
    return {"dbs": dbs, "queries": queries, "folder": folder}


def _compare(built, name, query, task, outfmt, extra=None) -> int:
    """Both tools' lines for one search; returns how many were compared."""
    extra = extra or {}
    db = built["dbs"][name]
    expected = blastn(query, db, "-task", task, "-outfmt", outfmt, *flags(extra))
    case = {"folder": built["folder"], "our_db": db, "blast_db": db}
    got = run_ours(case, query, task, outfmt, extra)
    assert not compare_lines(expected, got), compare_lines(expected, got)
    assert len([line for line in expected if not line.startswith("#")]) > 10
    return len(expected)


DATABASES = ("v5", "v5_parse_seqids", "v4", "v4_parse_seqids", "volumes_v5",
             "volumes_v4_parse_seqids", "two_databases", "alias_by_hand", "alias_by_aliastool")


@pytest.mark.parametrize("name", DATABASES)
def test_megablast_matches_blastn(built, name):
    if name not in built["dbs"]:
        pytest.skip("blastdb_aliastool is not installed")
    _compare(built, name, built["queries"], "megablast", COLUMNS_7)


@pytest.mark.parametrize("name", DATABASES)
def test_blastn_task_matches_blastn(built, name):
    if name not in built["dbs"]:
        pytest.skip("blastdb_aliastool is not installed")
    _compare(built, name, built["queries"], "blastn", COLUMNS_6)


SEVERAL = [(name, outfmt) for name in ("two_databases", "parsed_then_not", "not_then_parsed")
           for outfmt in ("0", "7 qseqid sseqid sallseqid sacc sgi stitle", "5", "17")] + \
    [("ties_named_backwards", outfmt) for outfmt in ("6", "0", "5")]


@pytest.mark.parametrize("name,outfmt", SEVERAL)
@pytest.mark.parametrize("limit", [[], ["-max_target_seqs", "1"]], ids=["all", "one"])
def test_several_databases_in_every_report_as_blastn(built, name, outfmt, limit, tmp_path):
    """A -db value of several databases: the pairwise footer names each; a sequence of a
    database without parsed ids is shown as one, whatever the others; the sequences are
    numbered (BL_ORD_ID, ties between subjects) in SeqDB's order of the volumes, by file
    name."""
    db = built["dbs"][name]
    expected = [line for line in blastn(built["queries"], db, "-outfmt", outfmt, *limit)
                if not line.startswith("@PG")]
    assert_blastn_found_hits(expected)
    out = tmp_path / "several.out"
    done = gblastn("search", "-db", db, "-query", built["queries"], "-outfmt", outfmt,
                   "-out", str(out), "-device", "cpu", *limit)
    assert done.returncode == 0, done.stderr
    got = [line for line in out.read_text().splitlines() if not line.startswith("@PG")]
    assert not compare_lines(expected, got), compare_lines(expected, got)


def test_blastn_task_custom_columns(built):
    _compare(built, "volumes_v4_parse_seqids", built["queries"], "blastn", COLUMNS_7)


def test_cli_search_of_a_makeblastdb_database(built, tmp_path):
    db = built["dbs"]["two_databases"]
    expected = blastn(built["queries"], db, "-outfmt", "7")
    assert_blastn_found_hits(expected)
    out = tmp_path / "cli.out"
    done = gblastn("search", "-db", db, "-query", built["queries"], "-outfmt", "7",
                   "-out", str(out))
    assert done.returncode == 0, done.stderr
    got = out.read_text().splitlines()
    assert not compare_lines(expected, got), compare_lines(expected, got)


@pytest.mark.parametrize("name", ("v5", "v4_parse_seqids", "volumes_v5"))
def test_dbcmd_prints_what_blastdbcmd_prints(built, name):
    """Deflines and true letters (ambiguity codes restored) of every sequence."""
    if shutil.which("blastdbcmd") is None:
        pytest.skip("blastdbcmd is not installed")
    db = built["dbs"][name]
    expected = subprocess.run(["blastdbcmd", "-db", db, "-entry", "all", "-line_length", "60"],
                              check=True, capture_output=True, text=True).stdout
    done = gblastn("dbcmd", "-db", db, "-entry", "all", "-line_length", "60")
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
