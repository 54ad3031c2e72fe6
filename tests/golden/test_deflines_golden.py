"""Golden tests: a FASTA title whose deflines are separated by ^A gives a sequence several
deflines in a database made with -parse_seqids (makeblastdb's or gblastn's), one without;
every report shows them as blastn 2.12 does (sseqid the primary defline's ids, sallseqid
each defline's, the pairwise title a line each, XML's Hit_def joined with ' >', JSON's and
XML2's descriptions a list)."""

import subprocess

import numpy as np
import pytest

from golden import assert_blastn_found_hits, compare_lines, needs_blast, random_dna, revcomp, \
    write_fasta
from report_golden import blastn_output, gblastn_output

pytestmark = [pytest.mark.golden, needs_blast]

# ^A between deflines; ids of several kinds, a GI in a later defline (the primary one), a
# first defline without a title, a bare accession, a title that ends in blanks, a
# third-party annotation (TPA)
TITLES = ("seq1 first title\x01seq2 second title\x01gi|123|gb|AB000001.2| third",
          "ref|NM_000001.1| alpha\x01lcl|loc2 beta\x01gnl|db|tag gamma",
          "lcl|x1\x01emb|X12345.1| t2\x01pdb|1ABC|A t3",
          "AB000004.1 bare accession\x01x4 local one",
          "plain one defline, blanks after it  ",
          "tpg|DAA00001.1| third-party annotation")
ID_COLUMNS = ("qseqid sseqid sallseqid sgi sallgi sacc saccver sallacc stitle salltitles "
              "staxid staxids evalue bitscore")
OUTFMTS = ("6 " + ID_COLUMNS, "7 " + ID_COLUMNS, "0", "5", "15", "16", "17", "17 SR")


def _normalised(text: str) -> list:
    """The report's lines but those naming the program that wrote it or the database's
    build time."""
    return [line for line in text.splitlines()
            if not line.startswith("@PG") and "Posted date" not in line]


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    from gblastn.db.writer import make_db

    folder = tmp_path_factory.mktemp("deflines")
    rng = np.random.default_rng(37)
    subjects = [random_dna(rng, 400) for _ in TITLES]
    fasta = write_fasta(folder / "db.fa", list(zip(TITLES, subjects)))
    queries = write_fasta(folder / "q.fa", [
        ("q1 the first subject", subjects[0][30:330]),
        ("q2 two subjects", np.concatenate([subjects[1][10:200], subjects[4][5:150]])),
        ("q3 minus strand", revcomp(subjects[2][50:350])),
        ("q4 the fourth", subjects[3][100:380]),
        ("q5 third party", subjects[5][40:360])])
    dbs = {}  # -parse_seqids or not: (makeblastdb's database, makedb's)
    for parse in (True, False):
        name = "parsed" if parse else "plain"
        blast_db, our_db = str(folder / name), str(folder / f"ours_{name}")
        subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-out", blast_db]
                       + (["-parse_seqids"] if parse else []), check=True, capture_output=True)
        make_db([fasta], our_db, parse_seqids=parse, progress=False)
        dbs[parse] = blast_db, our_db
    return {"folder": folder, "queries": queries, "dbs": dbs}


@pytest.mark.parametrize("outfmt", OUTFMTS)
@pytest.mark.parametrize("parse", [True, False], ids=["parse_seqids", "plain"])
@pytest.mark.parametrize("ours", [False, True], ids=["makeblastdb", "makedb"])
def test_reports_equal_blastn(case, outfmt, parse, ours):
    """gblastn on makeblastdb's database, and on its own made from the same FASTA, writes
    what blastn writes on makeblastdb's."""
    db, our_db = case["dbs"][parse]
    expected = blastn_output(case["queries"], db, "megablast", outfmt)
    assert_blastn_found_hits(expected if outfmt.startswith(("6", "7")) else ["hit"])
    if outfmt.startswith("6") and parse:  # the case shows several deflines a subject
        assert "seq1;seq2;gi|123|gb|AB000001.2|" in expected
    searched = our_db if ours else db
    got = gblastn_output(case, case["queries"], searched, "megablast", outfmt)
    expected_lines = _normalised(expected)
    got_lines = [line.replace(searched, db) for line in _normalised(got)]
    assert got_lines == expected_lines, compare_lines(expected_lines, got_lines)


@pytest.mark.parametrize("ours", [False, True], ids=["makeblastdb", "makedb"])
def test_pairwise_with_gis_equals_blastn(case, ours):
    """-show_gis: the alignments' titles, each defline's GI on its line, as blastn writes
    them (its descriptions write a local id against its title, README's one departure)."""
    db, our_db = case["dbs"][True]
    expected = _titles(blastn_output(case["queries"], db, "megablast", "0", "-show_gis"))
    got = _titles(gblastn_output(case, case["queries"], our_db if ours else db, "megablast",
                                 "0", show_gis=True))
    assert ">seq1 first title" in expected and " gi|123|gb|AB000001.2| third" in expected
    assert got == expected, compare_lines(expected, got)


def _titles(text: str) -> list:
    """The pairwise report's title lines: from each '>' to its Length= line."""
    lines, inside = [], False
    for line in text.splitlines():
        inside = (inside or line.startswith(">")) and not line.startswith("Length=")
        if inside:
            lines.append(line)
    return lines


def test_makedb_stores_the_deflines_apart_only_with_parse_seqids(case):
    from gblastn.db.reader import open_db

    folder = case["folder"]
    with open_db(str(folder / "ours_parsed")) as parsed, \
            open_db(str(folder / "ours_plain")) as plain:
        assert parsed.defline_texts(0) == ["seq1 first title", "seq2 second title",
                                           "gi|123|gb|AB000001.2| third"]
        assert plain.defline_texts(0) == [TITLES[0].replace("\x01", " ")]
        assert parsed.find("loc2") == 1 and parsed.find("AB000001") == 0


@pytest.mark.parametrize("listing", ["seqidlist", "negative_seqidlist"])
@pytest.mark.parametrize("ours", [False, True], ids=["makeblastdb", "makedb"])
def test_a_seqidlist_shows_the_deflines_blastn_shows(case, listing, ours):
    """A list naming some deflines of a sequence: blastn shows those (a negative list: the
    others) and counts the sequences it keeps."""
    db, our_db = case["dbs"][True]
    ids = case["folder"] / "ids.txt"
    ids.write_text("seq2\nloc2\nAB000004\n")
    outfmt = "6 " + ID_COLUMNS
    expected = blastn_output(case["queries"], db, "megablast", outfmt, f"-{listing}",
                             str(ids))
    got = gblastn_output(case, case["queries"], our_db if ours else db, "megablast", outfmt,
                         **{listing: str(ids)})
    assert ("\tseq2\t" in expected) == (listing == "seqidlist")
    assert got.splitlines() == expected.splitlines(), \
        compare_lines(expected.splitlines(), got.splitlines())


@pytest.fixture(scope="module")
def untitled(tmp_path_factory):
    """A database without parsed ids whose deflines hold no id (a bare '>', or blanks),
    by makeblastdb and by makedb, and queries from them."""
    from gblastn.db.writer import make_db

    folder = tmp_path_factory.mktemp("untitled")
    rng = np.random.default_rng(41)
    subjects = [random_dna(rng, 400) for _ in range(3)]
    fasta = folder / "db.fa"
    fasta.write_text("".join(f"{title}\n{letters.tobytes().decode()}\n" for title, letters
                             in zip((">", "> ", ">named one"), subjects)))
    queries = write_fasta(folder / "q.fa", [(f"q{k}", letters[20:320])
                                            for k, letters in enumerate(subjects)])
    blast_db, our_db = str(folder / "plain"), str(folder / "ours")
    subprocess.run(["makeblastdb", "-in", str(fasta), "-dbtype", "nucl", "-out", blast_db],
                   check=True, capture_output=True)
    make_db([str(fasta)], our_db, progress=False)
    return {"folder": folder, "queries": queries, "dbs": (blast_db, our_db)}


@pytest.mark.parametrize("outfmt", ["6 " + ID_COLUMNS, "0", "5", "17"])
@pytest.mark.parametrize("ours", [False, True], ids=["makeblastdb", "makedb"])
def test_deflines_without_an_id_shown_by_ordinal_as_blastn(untitled, outfmt, ours):
    """A sequence whose defline holds no id is known by makeblastdb's ordinal id,
    gnl|BL_ORD_ID|N (accession BL_ORD_ID:N), in the tabular id columns."""
    db, our_db = untitled["dbs"]
    expected = blastn_output(untitled["queries"], db, "megablast", outfmt)
    if outfmt.startswith("6"):
        assert "gnl|BL_ORD_ID|0\tgnl|BL_ORD_ID|0" in expected and "BL_ORD_ID:1" in expected
    searched = our_db if ours else db
    got = gblastn_output(untitled, untitled["queries"], searched, "megablast", outfmt)
    expected_lines = _normalised(expected)
    got_lines = [line.replace(searched, db) for line in _normalised(got)]
    assert got_lines == expected_lines, compare_lines(expected_lines, got_lines)
