"""The makedb / dbinfo / dbcmd commands through `python -m gblastn`, error paths included."""

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO))


def gblastn(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "gblastn", *map(str, args)], capture_output=True,
                          env=ENV, input=stdin)


def assert_clean_failure(done, pattern):
    err = done.stderr.decode()
    assert done.returncode != 0
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    # one error line, last; anything before it is a warning (e.g. skipped empty records)
    assert lines[-1].startswith("gblastn: error: ") and pattern in lines[-1], err
    assert all(line.startswith("gblastn: warning: ") for line in lines[:-1]), err


def no_database(tmp_path, name="db"):
    return not (tmp_path / f"{name}.gdb").exists() and not any(
        p.name.startswith(f".{name}.gdb") for p in tmp_path.iterdir())


def volume_files(tmp_path, name="db"):
    return sorted((tmp_path / f"{name}.gdb").glob("gen-*/v*.mdb"))


def test_makedb_dbinfo_dbcmd(tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_bytes(b">a first\nACGTN\n>b\nrykm\n")
    done = gblastn("makedb", "-in", fasta, "-out", tmp_path / "db", "-title", "My DB")
    assert done.returncode == 0, done.stderr
    info = gblastn("dbinfo", "-db", tmp_path / "db").stdout.decode()
    assert "Database: My DB" in info and "2 sequences; 9 total bases" in info
    assert gblastn("dbcmd", "-db", tmp_path / "db", "-entry", "b,a").stdout == b">b\nRYKM\n>a first\nACGTN\n"


def test_stdin_gzip_and_quiet(tmp_path):
    data = gzip.compress(b">x\nAC\n")
    done = gblastn("makedb", "-in", "-", "-out", tmp_path / "db", "-quiet", stdin=data)
    assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""
    assert gblastn("dbcmd", "-db", tmp_path / "db", "-entry", "all").stdout == b">x\nAC\n"


def test_parse_seqids_ids_and_duplicates(tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_bytes(b">gi|5|gb|AB000001.2| one\nACGT\n>lcl|x two\nAC\n")
    assert gblastn("makedb", "-in", fasta, "-out", tmp_path / "db", "-parse_seqids").returncode == 0
    out = gblastn("dbcmd", "-db", tmp_path / "db", "-entry", "AB000001,x").stdout
    assert out == b">AB000001.2 one\nACGT\n>x two\nAC\n"
    fasta.write_bytes(b">s1 a\nACGT\n>s1 b\nAC\n")
    done = gblastn("makedb", "-in", fasta, "-out", tmp_path / "dup", "-parse_seqids")
    assert_clean_failure(done, "duplicate sequence id 's1'")
    assert no_database(tmp_path, "dup")


def test_volumes_split_by_max_file_sz(tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_text("".join(f">s{i}\n{'ACGT' * 300}\n" for i in range(10)))
    assert gblastn("makedb", "-in", fasta, "-out", tmp_path / "db", "-max_file_sz", "1kB").returncode == 0
    info = gblastn("dbinfo", "-db", tmp_path / "db").stdout.decode()
    assert info.count(".mdb") == 5  # 2 x (300 packed bytes + overhead) fit in 1 kB, 3 do not


@pytest.mark.parametrize("content,pattern", [
    (None, "no such file"),
    (b"", "no sequences found"),
    (b"ACGT\n>x\nACGT\n", "in.fa:1: text before the first '>'"),
    (b">x\n>y\n", "no sequences found"),
    (b">x\nACGT\nAC*T\n", "in.fa:3: invalid character '*'"),
    (bytes(range(256)) * 4, "in.fa:1: text before the first '>'"),
    (b">x\nAC\x00\xffGT\n", "in.fa:2: invalid character '\\x00'"),
])
def test_bad_input_fails_cleanly(tmp_path, content, pattern):
    fasta = tmp_path / "in.fa"
    if content is not None:
        fasta.write_bytes(content)
    done = gblastn("makedb", "-in", fasta, "-out", tmp_path / "db", "-strict")
    assert_clean_failure(done, pattern)
    assert no_database(tmp_path)


def test_record_without_sequence_is_skipped_as_makeblastdb_does(tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_bytes(b">a\nAC\n>empty\n>b\nGG\n")
    done = gblastn("makedb", "-in", fasta, "-out", tmp_path / "db")
    assert done.returncode == 0
    assert "ignoring sequence 'empty'" in done.stderr.decode()
    assert gblastn("dbcmd", "-db", tmp_path / "db", "-entry", "all").stdout == b">a\nAC\n>b\nGG\n"


def test_failed_build_keeps_existing_database(tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_bytes(b">a\nACGT\n")
    assert gblastn("makedb", "-in", fasta, "-out", tmp_path / "db").returncode == 0
    fasta.write_bytes(b">a\nACGT\n>b\nA%C\n")
    assert_clean_failure(gblastn("makedb", "-in", fasta, "-out", tmp_path / "db", "-strict"),
                         "invalid character '%'")
    assert gblastn("dbcmd", "-db", tmp_path / "db", "-entry", "all").stdout == b">a\nACGT\n"


def test_bad_options(tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_bytes(b">a\nACGT\n")
    assert_clean_failure(gblastn("makedb", "-in", fasta, "-dbtype", "prot", "-out", tmp_path / "db"),
                         "-dbtype prot")
    assert_clean_failure(gblastn("makedb", "-in", fasta, "-out", tmp_path / "db", "-max_file_sz", "lots"),
                         "-max_file_sz")
    assert no_database(tmp_path)


def test_unwritable_output_directory(tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_bytes(b">a\nACGT\n")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert_clean_failure(gblastn("makedb", "-in", fasta, "-out", blocker / "db"), "not a directory")
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o500)
    try:
        if os.access(read_only, os.W_OK):
            pytest.skip("running with privileges that ignore directory permissions")
        assert_clean_failure(gblastn("makedb", "-in", fasta, "-out", read_only / "db"), "cannot write")
    finally:
        read_only.chmod(0o700)


def test_damaged_volume_fails_cleanly(tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_bytes(b">a\n" + b"ACGT" * 5000 + b"\n")
    assert gblastn("makedb", "-in", fasta, "-out", tmp_path / "db").returncode == 0
    (volume,) = volume_files(tmp_path)
    data = bytearray(volume.read_bytes())
    at = data.find(b"\x1b" * 64)  # inside the packed bases ('ACGT' = 0x1b)
    data[at:at + 8] = b"\x00" * 8
    volume.write_bytes(bytes(data))
    assert_clean_failure(gblastn("dbcmd", "-db", tmp_path / "db", "-entry", "all"), "damaged")
    volume.write_bytes(bytes(data[:-4096]))
    assert_clean_failure(gblastn("dbinfo", "-db", tmp_path / "db"), "damaged")
