"""Streaming FASTA reader: records, line endings, gzip, stdin-free paths, errors."""

import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.errors import InputError
from gblastn.fasta import Header, Record, iter_fasta, iter_records, to_blastna


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


class CountingReader:
    """A binary stream of `data` that counts the bytes handed out."""

    def __init__(self, data: bytes):
        self.data, self.given = data, 0

    def read(self, size: int) -> bytes:
        piece = self.data[self.given:self.given + size]
        self.given += len(piece)
        return piece


def test_a_bad_byte_at_the_start_of_a_long_line_is_found_in_the_first_chunk():
    stream = CountingReader(b">x\nAC*" + b"ACGT" * 2_000_000 + b"\n")
    with pytest.raises(InputError, match=r"<text>:2: invalid character '\*'"):
        list(iter_fasta(stream, chunk_bytes=1 << 16))
    assert stream.given == 1 << 16


def test_letters_come_in_pieces_of_at_most_one_chunk():
    seq = b"ACGT" * 250_000
    items = list(iter_fasta(CountingReader(b">long\n" + seq + b"\n>b\nGG\n"), chunk_bytes=4096))
    assert items[0] == Header(b"long", 1)
    pieces = items[1:-2]
    assert b"".join(pieces) == seq and max(map(len, pieces)) <= 4096
    assert items[-2:] == [Header(b"b", 3), b"GG"]


def test_any_chunking_gives_the_same_items():
    rng = np.random.default_rng(11)
    parts = []
    for i in range(30):
        count = int(rng.integers(0, 300))
        letters = rng.choice(list(b"ACGTNacgtn"), count).astype(np.uint8).tobytes()
        width = int(rng.integers(1, 90))
        end = rng.choice([b"\n", b"\r\n"])
        lines = [letters[at:at + width] for at in range(0, len(letters), width)]
        parts.append(b">s%d d\xc3\xa9f" % i + end + end.join(lines) + end)
    data = b"".join(parts)
    expected = [(r.defline, r.letters.tobytes(), r.line)
                for r in iter_records(CountingReader(data))]
    for chunk in (1, 2, 3, 7, 64, 1000):
        got = [(r.defline, r.letters.tobytes(), r.line)
               for r in iter_records(CountingReader(data), chunk_bytes=chunk)]
        assert got == expected
    assert len(expected) == 30 and expected[4][0] == "s4 d\u00e9f"


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
def test_dropped_letters_are_reported_by_line_and_column_however_chunked(tmp_path, chunk):
    """makeblastdb's reading: bytes outside the alphabet dropped and reported when their
    line ends (runs as ranges), a ';' dropping the rest of its line silently."""
    data = b">s1 d;x\nAC1G*TT\nA\tC..9G;ACG*T\n;GGGG\nT X\n>s2\nGGA;1\n**"
    warnings = []
    items = list(iter_fasta(write(tmp_path, data), chunk_bytes=chunk,
                            report_dropped=warnings.append))
    letters = {}
    for item in items:
        if isinstance(item, Header):
            name = item.defline
            letters[name] = b""
        else:
            letters[name] += item
    assert letters == {b"s1 d;x": b"ACGTTACGT", b"s2": b"GGA"}
    prefix = "FASTA-Reader: Ignoring invalid residues at position(s): On line "
    assert warnings == [prefix + "2: 3, 5", prefix + "3: 4-6", prefix + "5: 3", prefix + "8: 1-2"]


def _checked_by_tables(line: bytes, blast_input: bool) -> tuple:
    """CFastaReader::CheckDataLine's verdict on a first data line, by per-byte tables: (refused,
    still unchecked after it). The reader counts with bytes.translate instead."""
    from gblastn.fasta import (_BLAST_INPUT_BYTES, _NEUTRAL, _PLAUSIBLE, _SEQUENCE_BYTES,
                               COMMENT_LINE_MARKS, PLAUSIBLE_CHECKED, WHITESPACE)

    def table(allowed):
        out = np.zeros(256, dtype=bool)
        out[np.frombuffer(allowed, dtype=np.uint8)] = True
        return out

    line = line.rstrip(WHITESPACE)
    if not line or line[0] in COMMENT_LINE_MARKS:
        return False, True
    codes = np.frombuffer(line[:PLAUSIBLE_CHECKED].split(b";", 1)[0], dtype=np.uint8)
    hyphen = codes == ord("-")
    good = int((table(_PLAUSIBLE)[codes] | (hyphen & (not blast_input))).sum())
    bad = int((~table(_PLAUSIBLE)[codes] & ~table(_NEUTRAL)[codes] & ~hyphen).sum())
    if bad >= good // 3 and (min(len(line), PLAUSIBLE_CHECKED) > 3 or good == 0 or bad > good):
        return True, True
    residues = np.frombuffer(line.split(b";", 1)[0].translate(None, WHITESPACE), np.uint8)
    allowed = table(_BLAST_INPUT_BYTES if blast_input else _SEQUENCE_BYTES)
    return False, not allowed[residues].any()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=90).map(lambda raw: bytes(b"ACGTNacgtn*-;!# \t0123456789.,_~xX"[
    byte % 33] for byte in raw)), st.booleans())
def test_first_line_check_counts_as_byte_tables(line, blast_input):
    """The first data line's plausibility check (a line per record of short reads) refuses
    and passes what per-byte tables of its classes would."""
    from gblastn.fasta import _Tokenizer

    tokenizer = _Tokenizer("in.fa", True, False, report_dropped=lambda text: None,
                           blast_input=blast_input)
    tokenizer.first_line = line.lstrip(b" \t")
    refused = False
    try:
        tokenizer._check_first_line(2)
    except InputError:
        refused = True
    assert (refused, refused or tokenizer.unchecked) == \
        _checked_by_tables(line.lstrip(b" \t"), blast_input)
