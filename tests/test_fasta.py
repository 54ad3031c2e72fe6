"""Streaming FASTA reader: records, line endings, gzip, stdin-free paths, errors."""

import gzip

import numpy as np
import pytest

from gblastn.errors import InputError
from gblastn.fasta import Record, iter_records, to_blastna


def write(tmp_path, data: bytes, name="in.fa"):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def records(path, **kw):
    return [(r.defline, r.letters.tobytes(), r.line) for r in iter_records(path, **kw)]


@pytest.mark.parametrize("chunk", [1, 2, 5, 64, 1 << 20])
def test_records_line_endings_blank_lines_and_chunking(tmp_path, chunk):
    data = b">s1 desc\r\nACGT\r\nac gu\r\n\r\n>s2\n\n>\nRYK\tMSW\n>last\nNN"
    got = records(write(tmp_path, data), chunk_bytes=chunk)
    assert got == [("s1 desc", b"ACGTacgu", 1), ("s2", b"", 5), ("", b"RYKMSW", 7), ("last", b"NN", 9)]


def test_gzip_detected_by_magic(tmp_path):
    data = b">a x\nACGT\n>b\nGG\n"
    path = tmp_path / "in.txt"
    path.write_bytes(gzip.compress(data))
    assert records(str(path)) == [("a x", b"ACGT", 1), ("b", b"GG", 3)]


def test_empty_file_has_no_records(tmp_path):
    assert records(write(tmp_path, b"")) == []
    assert records(write(tmp_path, b"\n\n  \n")) == []


def test_text_before_first_header(tmp_path):
    path = write(tmp_path, b"\nACGT\n>x\nAC\n")
    with pytest.raises(InputError, match=r"in.fa:2: text before the first '>'"):
        records(path)
    assert records(path, headerless_ok=True) == [("", b"ACGT", 2), ("x", b"AC", 3)]


@pytest.mark.parametrize("bad,shown", [(b"*", "*"), (b"1", "1"), (b"\x00", "\\x00"), (b"J", "J")])
def test_invalid_character_names_file_and_line(tmp_path, bad, shown):
    path = write(tmp_path, b">x\nACGT\nAC" + bad + b"T\n")
    with pytest.raises(InputError) as info:
        records(path)
    assert str(info.value).startswith(f"{path}:3: invalid character '{shown}'")


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        records(str(tmp_path / "nope.fa"))


def test_to_blastna_codes_and_lowercase():
    record = Record("x", np.frombuffer(b"ACgtNu-r", np.uint8), 1, "t")
    codes, lower = to_blastna(record)
    assert codes.tolist() == [0, 1, 2, 3, 14, 3, 14, 4]
    assert lower.tolist() == [False, False, True, True, False, True, False, True]
    with pytest.raises(InputError, match="t:1: invalid character '\\*'"):
        to_blastna(Record("x", np.frombuffer(b"AC*", np.uint8), 1, "t"))


def test_long_lines_and_record_ids(tmp_path):
    seq = b"ACGT" * 100_000
    path = write(tmp_path, b">id1  two words \n" + seq + b"\n")
    (record,) = iter_records(path, chunk_bytes=4096)
    assert record.letters.tobytes() == seq and record.id == "id1"
    assert record.defline == "id1  two words "
