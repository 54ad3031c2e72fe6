"""Reading makeblastdb's databases: deflines (BER), letters and ambiguity runs, alias files,
and the errors for missing or damaged files."""

import os
import shutil
import subprocess

import numpy as np
import pytest

from golden import gblastn, write_fasta
from gblastn.alphabet import IUPAC_FROM_BLASTNA
from gblastn.db.blast_deflines import BerError, Defline, decode_deflines
from gblastn.db.blastdb import BlastDatabase, BlastVolume
from gblastn.db.reader import Database, open_db
from gblastn.db.writer import make_db
from gblastn.errors import DatabaseError

needs_makeblastdb = pytest.mark.skipif(shutil.which("makeblastdb") is None,
                                       reason="makeblastdb is not installed")

RECORDS = [
    ("gi|123|gb|AB123456.1| genbank with gi", "ACGTRYKMSWBDHVNACGTACGTAAAA"),
    ("ref|NC_000913.3| refseq", "ACGTACGTAC" * 3 + "N" * 40 + "acgtacgtac"),
    ("lcl|mylocal local one", "ACGTAC"),
    ("gnl|mydb|tag7 general", "NNNNACGTACGTNNNN"),
    ("emb|CAA12345.2| embl", "ACGTACGTACGTA"),
    ("pdb|1ABC|A pdb chain", "TTTTGGGGCCCCAAAA"),
    ("sp|P12345.1|NAME_HUMAN swissprot", "ACGT" * 5),
    ("AB999999.2 bare accession", "GATTACA"),
    ("plainname", "ACGTTGCA" * 600 + "N" * 5000 + "RYRYRY" + "ACGT" * 100),
    ("lcl|42 numeric local", "A"),
]
PARSED = [
    Defline("genbank with gi", ("gi|123", "gb|AB123456.1|")),
    Defline("refseq", ("ref|NC_000913.3|",)),
    Defline("local one", ("lcl|mylocal",)),
    Defline("general", ("gnl|mydb|tag7",)),
    Defline("embl", ("emb|CAA12345.2|",)),
    Defline("pdb chain", ("pdb|1ABC|A",)),
    Defline("swissprot", ("sp|P12345.1|NAME_HUMAN",)),
    Defline("bare accession", ("dbj|AB999999.2|",)),
    Defline("", ("lcl|plainname",)),
    Defline("numeric local", ("lcl|42",)),
]


def _makeblastdb(fasta, out, *args):
    subprocess.run(["makeblastdb", "-in", str(fasta), "-dbtype", "nucl", "-out", str(out),
                    *args], check=True, capture_output=True)
    return str(out)


@pytest.fixture(scope="module")
def fasta(tmp_path_factory):
    return write_fasta(tmp_path_factory.mktemp("fasta") / "ids.fa", RECORDS)


@pytest.fixture
def blast_db(tmp_path, fasta):
    return _makeblastdb(fasta, tmp_path / "db" / "ids")


def _headers(prefix):
    """Each sequence's header bytes, read with the index's offsets."""
    volume = BlastVolume(prefix)
    with open(prefix + ".nhr", "rb") as handle:
        data = handle.read()
    at = volume._header_at.tolist()
    return [data[a:b] for a, b in zip(at[:-1], at[1:])]


@needs_makeblastdb
@pytest.mark.parametrize("version", ["4", "5"])
def test_deflines_decoded_from_makeblastdb_headers(tmp_path, fasta, version):
    parsed = _makeblastdb(fasta, tmp_path / "p", "-parse_seqids", "-blastdb_version", version)
    assert [decode_deflines(raw) for raw in _headers(parsed)] == [[d] for d in PARSED]
    plain = _makeblastdb(fasta, tmp_path / "n", "-blastdb_version", version)
    decoded = [decode_deflines(raw)[0] for raw in _headers(plain)]
    assert decoded == [Defline(name, (f"gnl|BL_ORD_ID|{oid}",))
                       for oid, (name, _) in enumerate(RECORDS)]
    assert not any(d.parsed for d in decoded) and all(d.parsed for d in PARSED)


def _tlv(tag: int, content: bytes) -> bytes:
    """A BER element with a definite length (long form past 127 bytes)."""
    size = len(content)
    length = bytes([size]) if size < 128 else bytes([0x81, size]) if size < 256 else \
        bytes([0x82]) + size.to_bytes(2, "big")
    return bytes([tag]) + length + content


def test_ber_decoder_reads_definite_lengths_and_refuses_damage():
    title = _tlv(0xA0, _tlv(0x1A, b"t" * 300))
    ids = _tlv(0xA1, _tlv(0x30, _tlv(0xAB, _tlv(0x02, b"\x01\x00")) +
                          _tlv(0xA0, _tlv(0xA0, _tlv(0x02, b"\xff")))))
    definite = _tlv(0x30, _tlv(0x30, title + ids))
    assert decode_deflines(definite) == [Defline("t" * 300, ("gi|256", "lcl|-1"))]
    for damaged in (definite[:-1], b"\x30\x80\x30\x80", b"", b"\x04\x01x",
                    b"\x30\x80\x00\x00"):
        with pytest.raises(BerError):
            decode_deflines(damaged)


@needs_makeblastdb
def test_true_letters_ids_and_counts(blast_db):
    with open_db(blast_db) as db:
        assert isinstance(db, BlastDatabase)
        assert db.num_seqs == len(RECORDS)
        assert db.total_letters == db.stats_letters == sum(len(s) for _, s in RECORDS)
        assert db.lengths.tolist() == [len(s) for _, s in RECORDS]
        for ordinal, (name, letters) in enumerate(RECORDS):
            assert IUPAC_FROM_BLASTNA[db.blastna(ordinal)].tobytes().decode() == letters.upper()
            assert db.defline(ordinal) == name
            assert db.seq_id(ordinal) == name.split()[0]
        assert IUPAC_FROM_BLASTNA[db.blastna(8, 4799, 4810)].tobytes() == b"A" + b"N" * 10
        assert not db.parse_seqids
        assert db.find("plainname") == 8


@needs_makeblastdb
def test_packed_bases_are_gblastn_makedb_substitutes(tmp_path, fasta, blast_db):
    """The same 2-bit bases (makeblastdb's substitutes at ambiguous positions) and runs as
    gblastn's own database holds."""
    ours = make_db([fasta], str(tmp_path / "ours"), progress=False)
    with open_db(blast_db) as theirs, Database(str(ours)) as own:
        for ordinal in range(own.num_seqs):
            a, b = theirs.packed(ordinal), own.packed(ordinal)
            length = int(own.lengths[ordinal])
            assert a[:length // 4].tobytes() == b[:length // 4].tobytes()
            if length % 4:  # the last byte's bases; makeblastdb keeps their count beside them
                keep = 0xFF << (8 - 2 * (length % 4)) & 0xFF
                assert a[-1] & keep == b[-1] & keep
            assert np.array_equal(theirs.blastna(ordinal), own.blastna(ordinal))
        volume = theirs.volumes[0]
        buffer, offset = volume.concat_packed()
        assert not buffer.flags.writeable and offset[-1] == buffer.size
        assert volume.bases_only(np.array([8, 8]), np.array([0, 4700]),
                                 np.array([4800, 4801])).tolist() == [True, False]


@needs_makeblastdb
def test_parsed_ids(tmp_path, fasta):
    db = BlastDatabase(_makeblastdb(fasta, tmp_path / "p", "-parse_seqids"))
    assert db.parse_seqids
    assert [db.seq_id(o) for o in range(4)] == ["gi|123|gb|AB123456.1|", "ref|NC_000913.3|",
                                                "mylocal", "gnl|mydb|tag7"]
    assert [db.accession(o) for o in (0, 3, 5)] == ["AB123456.1", "mydb:tag7", "1ABC_A"]
    assert db.title_of(0) == "genbank with gi"
    assert db.find("NC_000913") == 1
    db.close()


@needs_makeblastdb
def test_alias_files_and_several_names(tmp_path, fasta):
    _makeblastdb(fasta, tmp_path / "a")
    _makeblastdb(fasta, tmp_path / "b")
    (tmp_path / "both.nal").write_text('TITLE both\nDBLIST a "b" a\n')
    (tmp_path / "sized.nal").write_text("DBLIST both\nNSEQ 7\nLENGTH 1000\n")
    (tmp_path / "again.nal").write_text("DBLIST a\n")
    n, letters = len(RECORDS), sum(len(s) for _, s in RECORDS)
    with BlastDatabase(str(tmp_path / "both")) as db:
        assert (db.title, db.num_seqs, db.stats_num_seqs) == ("both", 2 * n, 2 * n)
        assert [v.first_ordinal for v in db.volumes] == [0, n]
    with BlastDatabase(str(tmp_path / "sized")) as db:
        assert (db.num_seqs, db.total_letters) == (2 * n, 2 * letters)
        assert (db.stats_num_seqs, db.stats_letters) == (7, 1000)
    # a volume named twice is searched once, and counts twice for E-values (as blastn)
    with BlastDatabase(f"{tmp_path}/a {tmp_path}/again {tmp_path}/a") as db:
        assert (db.num_seqs, db.stats_num_seqs, db.stats_letters) == (n, 2 * n, 2 * letters)


@needs_makeblastdb
def test_several_volumes(tmp_path):
    records = [(f"s{i} piece {i}", "ACGT" * 2000 + "N" * i + "TTGCA" * 10) for i in range(12)]
    prefix = _makeblastdb(write_fasta(tmp_path / "many.fa", records), tmp_path / "many",
                          "-max_file_sz", "20000")
    assert os.path.isfile(prefix + ".nal") and os.path.isfile(prefix + ".01.nin")
    with open_db(prefix) as db:
        assert len(db.volumes) > 1 and db.num_seqs == 12
        for ordinal, (name, letters) in enumerate(records):
            assert IUPAC_FROM_BLASTNA[db.blastna(ordinal)].tobytes().decode() == letters
            assert db.title_of(ordinal) == name


# ---------------------------------------------------------------------------------------------
# Errors


def _open_fails(name, message):
    with pytest.raises(DatabaseError, match=message):
        open_db(name)


@needs_makeblastdb
@pytest.mark.parametrize("suffix", [".nsq", ".nhr"])
def test_missing_volume_file(blast_db, suffix):
    os.remove(blast_db + suffix)
    _open_fails(blast_db, f"missing volume file .*ids\\{suffix}")


@needs_makeblastdb
def test_truncated_files(blast_db):
    for suffix, message in ((".nsq", r"ids\.nsq is truncated"), (".nhr", r"ids\.nhr is truncated"),
                            (".nin", "damaged index")):
        path = blast_db + suffix
        data = open(path, "rb").read()
        with open(path, "wb") as handle:
            handle.write(data[:len(data) - 3])
        _open_fails(blast_db, message)
        with open(path, "wb") as handle:
            handle.write(data)


@needs_makeblastdb
def test_damaged_sequence_and_header_data(blast_db):
    volume = BlastVolume(blast_db)
    amb = int(volume._amb_at[0])
    with open(blast_db + ".nsq", "r+b") as handle:  # the last byte's base count
        handle.seek(amb - 1)
        last = handle.read(1)[0]
        handle.seek(amb - 1)
        handle.write(bytes([last ^ 1]))
    _open_fails(blast_db, "lengths do not match")
    with open(blast_db + ".nsq", "r+b") as handle:
        handle.seek(amb - 1)
        handle.write(bytes([last]))
        handle.seek(amb)  # the ambiguity run count, beyond the block
        handle.write(b"\x00\x00\x7f\x00")
    with open_db(blast_db) as db, \
            pytest.raises(DatabaseError, match="ambiguity data of sequence 0"):
        db.blastna(0)
    header = int(volume._header_at[1])
    with open(blast_db + ".nhr", "r+b") as handle:
        handle.seek(header)
        handle.write(b"\x04")
    with open_db(blast_db) as db, pytest.raises(DatabaseError, match="defline of sequence 1"):
        db.seq_id(1)


@needs_makeblastdb
def test_bad_alias_files(tmp_path, blast_db):
    cases = {
        "garbage": (b"\x00\x01garbage\xff\nmore garbage\n", "no database names were found"),
        "empty": (b"TITLE nothing\nDBLIST\n", "no database names were found"),
        "missing": (b"DBLIST db/ids nothere\n", "names nothere, which is neither"),
        "cycle": (b"DBLIST cycle2\n", "names itself"),
        "cycle2": (b"DBLIST cycle\n", "names itself"),
        "subset": (b"DBLIST db/ids\nOIDLIST db/ids.msk\n", "OIDLIST .* not supported"),
        "count": (b"DBLIST db/ids\nNSEQ many\n", "NSEQ 'many' is not a count"),
    }
    for name, (text, _) in cases.items():
        (tmp_path / f"{name}.nal").write_bytes(text)
    for name, (_, message) in cases.items():
        _open_fails(str(tmp_path / name), message)


@needs_makeblastdb
def test_mixed_versions_refused(tmp_path, fasta):
    four = _makeblastdb(fasta, tmp_path / "four", "-blastdb_version", "4")
    five = _makeblastdb(fasta, tmp_path / "five")
    _open_fails(f"{four} {five}", "mix BLAST database versions 4 and 5")
    _open_fails(f"{five} {tmp_path}/none", "none: no BLAST database found")


def test_neither_database(tmp_path):
    _open_fails(str(tmp_path / "nothing"), "no gblastn database found .* nor a BLAST\\+ database")


@needs_makeblastdb
def test_cli_reports_a_damaged_database_in_one_line(blast_db, tmp_path):
    query = write_fasta(tmp_path / "q.fa", [("q", "ACGTACGTACGTAAAAACGTACGT")])
    with open(blast_db + ".nsq", "r+b") as handle:
        handle.truncate(10)
    done = gblastn("search", "-db", blast_db, "-query", query)
    assert done.returncode == 3
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("gblastn: error: ") and "ids.nsq is truncated" in done.stderr


@needs_makeblastdb
def test_names_found_in_blastdb_folders(tmp_path, blast_db, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folders = [str(tmp_path / "none"), os.path.dirname(blast_db)]
    monkeypatch.setenv("BLASTDB", os.pathsep.join(folders))
    with open_db("ids") as db:
        assert db.num_seqs == len(RECORDS)


def test_a_database_of_several_volumes_is_dated_by_its_newest():
    """SeqDB dates a database of several volumes (an alias, several -db names) by the
    latest build among them, whatever their order; a date of another form leaves the
    first volume's."""
    from types import SimpleNamespace

    from gblastn.db.blastdb import newest_date

    dated = [SimpleNamespace(created=text) for text in
             ("Nov 29, 2026  01:40 PM", "Nov 29, 2026  11:05 AM", "Dec 01, 2025  09:00 PM")]
    assert newest_date(dated) == "Nov 29, 2026  01:40 PM"
    assert newest_date(dated[::-1]) == "Nov 29, 2026  01:40 PM"
    assert newest_date([SimpleNamespace(created="Unknown")] + dated) == "Unknown"
