"""Streaming FASTA reading: plain or gzip files, or stdin, in large binary chunks.

`iter_records` yields one `Record` per '>' line with the sequence letters as ASCII bytes
(whitespace removed, case kept). Only one record's letters (plus one read chunk) are held in
memory at a time, so a multi-gigabase file with chromosome-sized records reads in memory bounded
by its longest record. Letters are checked as they are read, so an invalid character is reported
with its exact file and line.

`to_blastna` turns a record's letters into blastna codes plus the lower-case mask.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
from dataclasses import dataclass
from typing import BinaryIO, Iterator

import numpy as np

from .alphabet import BLASTNA_FROM_ASCII, INVALID
from .errors import InputError

CHUNK_BYTES = 8 << 20
GZIP_MAGIC = b"\x1f\x8b"
WHITESPACE = b" \t\r\n\v\f"
# every byte that may appear in a sequence line: the alphabet (either case) and whitespace
_SEQUENCE_BYTES = bytes(int(b) for b in np.flatnonzero(BLASTNA_FROM_ASCII != INVALID)) + WHITESPACE
_SEQUENCE_BYTE_OK = np.zeros(256, dtype=bool)
_SEQUENCE_BYTE_OK[np.frombuffer(_SEQUENCE_BYTES, dtype=np.uint8)] = True


@dataclass
class Record:
    """One FASTA record as read."""

    defline: str          # text after '>', line end removed
    letters: np.ndarray   # uint8 ASCII letters, whitespace removed, case kept (read-only view)
    line: int             # 1-based line number of the '>' line
    source: str           # file name as given ('-' for stdin)

    @property
    def id(self) -> str:
        """First whitespace-delimited token of the defline ('' when the defline is empty)."""
        parts = self.defline.split(None, 1)
        return parts[0] if parts else ""

    def __len__(self) -> int:
        return int(self.letters.size)


def _describe_byte(value: int) -> str:
    char = chr(value)
    return char if char.isprintable() and value < 128 else f"\\x{value:02x}"


class _StreamParser:
    """Cuts a byte stream into records. Works on blocks of whole lines; keeps the line count."""

    def __init__(self, source: str, validate: bool, headerless_ok: bool, header_errors: str):
        self.source = source
        self.validate = validate
        self.headerless_ok = headerless_ok
        self.header_errors = header_errors
        self.defline: bytes | None = None
        self.header_line = 0
        self.pieces: list[bytes] = []
        self.lines_done = 0      # newlines before the current block
        self.seen_text = False   # any sequence letters before the first '>'

    # -- one block of whole lines -------------------------------------------------------------
    def feed(self, block: bytes) -> Iterator[Record]:
        counted_pos, counted_lines = 0, self.lines_done

        def line_at(pos: int) -> int:
            nonlocal counted_pos, counted_lines
            counted_lines += block.count(b"\n", counted_pos, pos)
            counted_pos = pos
            return counted_lines + 1

        pos = 0
        size = len(block)
        while pos < size:
            if block[pos] == 0x3E:  # '>' at a line start: a new record
                end = block.find(b"\n", pos)
                end = size if end < 0 else end
                record = self._finish()
                if record is not None:
                    yield record
                self.defline = block[pos + 1:end].rstrip(b"\r")
                self.header_line = line_at(pos)
                pos = end + 1
                continue
            seg_end = self._next_header(block, pos)
            self._add_sequence(block, pos, seg_end, line_at)
            pos = seg_end
        self.lines_done += block.count(b"\n")

    @staticmethod
    def _next_header(block: bytes, pos: int) -> int:
        """Start of the next '>' line after pos (or the block's end); '>' is rare in sequence
        data, so a plain byte search (memchr) and a look at the byte before beats a 2-byte find."""
        while True:
            at = block.find(b">", pos + 1)
            if at < 0:
                return len(block)
            if block[at - 1] == 0x0A:
                return at
            pos = at

    def _add_sequence(self, block: bytes, start: int, end: int, line_at) -> None:
        segment = block[start:end]
        if self.validate and segment.translate(None, _SEQUENCE_BYTES):
            codes = np.frombuffer(segment, dtype=np.uint8)
            bad = int(np.argmin(_SEQUENCE_BYTE_OK[codes]))
            if self.defline is None and not self.headerless_ok:
                self._text_before_header(line_at(start + bad))
            raise InputError(f"{self.source}:{line_at(start + bad)}: invalid character "
                             f"'{_describe_byte(int(codes[bad]))}' in a sequence")
        letters = segment.translate(None, WHITESPACE)
        if not letters:
            return
        if self.defline is None:
            first_letter = line_at(start + len(segment) - len(segment.lstrip()))
            if not self.headerless_ok:
                self._text_before_header(first_letter)
            self.defline = b""
            self.header_line = first_letter
        self.pieces.append(letters)

    def _text_before_header(self, line: int) -> None:
        raise InputError(f"{self.source}:{line}: text before the first '>' "
                         f"(not a FASTA file?)")

    def _finish(self) -> Record | None:
        if self.defline is None:
            return None
        joined = self.pieces[0] if len(self.pieces) == 1 else b"".join(self.pieces)
        record = Record(defline=self.defline.decode("utf-8", self.header_errors),
                        letters=np.frombuffer(joined, dtype=np.uint8),
                        line=self.header_line, source=self.source)
        self.defline, self.pieces = None, []
        return record

    def close(self) -> Iterator[Record]:
        record = self._finish()
        if record is not None:
            yield record


def open_binary(source: str | os.PathLike) -> BinaryIO:
    """A binary stream of `source` ('-' = stdin), gunzipped when it starts with gzip's magic."""
    name = os.fspath(source)
    if name == "-":
        raw = sys.stdin.buffer
        if not hasattr(raw, "peek"):
            raw = io.BufferedReader(raw)
        head = raw.peek(2)[:2]
    else:
        try:
            raw = open(name, "rb")
        except FileNotFoundError:
            raise InputError(f"{name}: no such file") from None
        except IsADirectoryError:
            raise InputError(f"{name}: is a directory, not a FASTA file") from None
        except OSError as exc:
            raise InputError(f"{name}: cannot read ({exc.strerror})") from None
        head = raw.read(2)
        raw.seek(0)
    if head == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")
    return raw


def _read_chunks(stream: BinaryIO, name: str, chunk_bytes: int) -> Iterator[bytes]:
    while True:
        try:
            chunk = stream.read(chunk_bytes)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(f"{name}: cannot read ({exc})") from None
        if not chunk:
            return
        yield chunk


def iter_records(source: str | os.PathLike | BinaryIO, validate: bool = True,
                 headerless_ok: bool = False, header_errors: str = "replace",
                 chunk_bytes: int = CHUNK_BYTES) -> Iterator[Record]:
    """Records of a FASTA file (plain or gzip, detected by magic bytes; '-' reads stdin), or
    of an open binary stream of FASTA text (named '<text>' in messages).

    With `validate`, a letter outside IUPAC (ACGTURYKMSWBDHVN, either case, and '-') raises
    InputError naming file and line. Letters before the first '>' raise InputError unless
    `headerless_ok`, which makes them a record with an empty defline (as BLAST reads a bare
    query sequence). `header_errors` is how bytes that are not UTF-8 are decoded in
    deflines: "replace" (U+FFFD) or "surrogateescape" (kept, to be written back as they came).
    """
    own_stream = not hasattr(source, "read")
    name = os.fspath(source) if own_stream else "<text>"
    parser = _StreamParser(name, validate, headerless_ok, header_errors)
    stream = open_binary(source) if own_stream else source
    try:
        carry = b""
        for chunk in _read_chunks(stream, name, chunk_bytes):
            data = carry + chunk if carry else chunk
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            if cut:
                yield from parser.feed(data[:cut] if cut < len(data) else data)
        if carry:
            yield from parser.feed(carry + b"\n")
        yield from parser.close()
    finally:
        if own_stream and stream is not sys.stdin.buffer:
            stream.close()


def to_blastna(record: Record) -> tuple[np.ndarray, np.ndarray]:
    """(blastna codes uint8, lower-case mask bool) of a record's letters.

    InputError for a letter outside the alphabet (only possible for records read with
    validate=False or built by hand).
    """
    letters = np.asarray(record.letters, dtype=np.uint8)
    codes = BLASTNA_FROM_ASCII[letters]
    invalid = codes == INVALID
    if invalid.any():
        bad = int(np.argmax(invalid))
        raise InputError(f"{record.source}:{record.line}: invalid character "
                         f"'{_describe_byte(int(letters[bad]))}' in sequence "
                         f"'{record.id}' at position {bad + 1}")
    lowercase = (letters >= 0x61) & (letters <= 0x7A)
    return codes, lowercase
