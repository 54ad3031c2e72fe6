"""Streaming FASTA reading: plain or gzip files, or stdin, in binary chunks.

`iter_fasta` yields each '>' line as a `Header` and the letters after it as pieces of at most
one chunk (whitespace removed, case kept), whatever the lengths of the lines: a consumer that
encodes the pieces as they come (makedb) holds no record's letters whole. `iter_records` joins
them into one `Record` per '>' line (queries). Letters are checked as they are read, so an
invalid character is reported with its exact file and line as soon as its chunk is read; or,
as makeblastdb's FASTA reader does, dropped with a warning naming their lines and columns,
a ';' dropping the rest of its line.

`to_blastna` turns a record's letters into blastna codes plus the lower-case mask.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
from dataclasses import dataclass
from typing import BinaryIO, Iterator, NamedTuple

import numpy as np

from .alphabet import BLASTNA_FROM_ASCII, INVALID
from .errors import InputError

CHUNK_BYTES = 8 << 20
GZIP_MAGIC = b"\x1f\x8b"
WHITESPACE = b" \t\r\n\v\f"
BLANKS = b" \t\r\v\f"
COMMENT = 0x3B  # ';': BLAST's FASTA reader ignores the rest of a sequence line from it, silently
COMMENT_LINE_MARKS = b"!#;"  # a line starting with one of these (after blanks) is a comment
HYPHEN = 0x2D
# every byte that may appear in a sequence line: the alphabet (either case) and whitespace
_SEQUENCE_BYTES = bytes(int(b) for b in np.flatnonzero(BLASTNA_FROM_ASCII != INVALID)) + WHITESPACE
# blastn's -query and -subject: the same but the hyphen, which its reader drops with a warning
_BLAST_INPUT_BYTES = _SEQUENCE_BYTES.replace(b"-", b"")


def _byte_table(allowed: bytes) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[np.frombuffer(allowed, dtype=np.uint8)] = True
    return table


_SEQUENCE_BYTE_OK = _byte_table(_SEQUENCE_BYTES)
_BLAST_INPUT_BYTE_OK = _byte_table(_BLAST_INPUT_BYTES)
_BLANK = _byte_table(BLANKS)
_COMMENT_LINE_MARK = _byte_table(COMMENT_LINE_MARKS)
# CFastaReader::CheckDataLine's classes of a record's first data line's bytes: letters and '*'
# look like sequence, blanks and digits are neutral, anything else does not
_PLAUSIBLE = bytes(range(65, 91)) + bytes(range(97, 123)) + b"*"
_NEUTRAL = WHITESPACE + b"0123456789"
PLAUSIBLE_CHECKED = 70  # the bytes of a line CheckDataLine looks at


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


def _ranges(columns: list) -> str:
    """'3, 7-9, 12': columns in increasing order, runs written as ranges."""
    runs = []
    for column in columns:
        if runs and column == runs[-1][1] + 1:
            runs[-1][1] = column
        else:
            runs.append([column, column])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _describe_byte(value: int) -> str:
    char = chr(value)
    return char if char.isprintable() and value < 128 else f"\\x{value:02x}"


class Header(NamedTuple):
    """A '>' line of a FASTA stream: its text after '>' (line end removed) and its number."""

    defline: bytes
    line: int


class _Tokenizer:
    """Cuts a byte stream, fed in chunks of any size (a chunk may end inside a line), into
    Header items and the letters that follow each one, as pieces of at most one chunk:
    whitespace removed, case kept, every byte checked. Memory holds one chunk and the header
    line being read, however long the sequence lines are, and a bad byte is reported as soon
    as the chunk holding it is read."""

    def __init__(self, source: str, validate: bool, headerless_ok: bool, report_dropped=None,
                 blast_input: bool = False):
        self.source = source
        self.validate = validate
        self.headerless_ok = headerless_ok
        self.report_dropped = report_dropped
        self.blast_input = blast_input
        self.held_cr = False          # a CR that ended the last chunk (blast_input)
        self.allowed = _BLAST_INPUT_BYTES if blast_input else _SEQUENCE_BYTES
        self.allowed_table = _BLAST_INPUT_BYTE_OK if blast_input else _SEQUENCE_BYTE_OK
        self.lines_done = 0           # newlines before the byte being looked at
        self.at_line_start = True
        self.column = 0               # bytes of its line before the byte being looked at
        self.line_started = False     # whether those bytes hold one that is not blank
        self.lead = 0                 # the blanks that start the line (columns count after them)
        self.in_comment = False       # inside a sequence line's comment (after its ';')
        self.dropped: dict[int, list] = {}  # the line being read: the columns dropped
        self.hyphen_lines: set[int] = set()  # lines whose hyphens were dropped (blast_input)
        self.header_parts: list[bytes] | None = None  # a '>' line not yet ended
        self.header_line = 0
        self.seen_header = False
        self.in_record = False        # whether a Header was given
        # CheckDataLine looks at a record's data lines until one holds a letter
        self.unchecked = report_dropped is not None
        self.first_line = b""         # the line being checked, from its first non-blank

    def feed(self, chunk: bytes) -> Iterator[Header | bytes]:
        if self.blast_input:
            chunk = self._lines_ended_by_newlines(chunk)
        pos = 0
        if self.header_parts is not None:
            pos = self._continue_header(chunk)
            if pos < 0:
                return
            yield from self._end_header()
        size = len(chunk)
        while pos < size:
            if self.at_line_start and chunk[pos] == 0x3E:  # '>' at a line start
                self.seen_header = True
                self.header_line = self.lines_done + 1
                self.header_parts = []
                pos = self._continue_header(chunk, pos + 1)
                if pos < 0:
                    return
                yield from self._end_header()
                continue
            end = self._next_header(chunk, pos)
            yield from self._sequence_text(chunk[pos:end])
            pos = end

    def _lines_ended_by_newlines(self, chunk: bytes) -> bytes:
        """blastn's line reader ends a line at CR LF, LF or a CR alone: the chunk with each
        of them a LF (a CR at its end is held back, the next chunk may start with a LF)."""
        if self.held_cr:
            chunk, self.held_cr = b"\r" + chunk, False
        if b"\r" not in chunk:
            return chunk
        if chunk.endswith(b"\r"):
            chunk, self.held_cr = chunk[:-1], True
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def close(self) -> Iterator[Header | bytes]:
        if self.held_cr:  # the last line's end
            yield from self.feed(b"\n")
        if self.header_parts is not None:
            yield from self._end_header()
        if self.unchecked and self.first_line:
            self._check_first_line(self.lines_done + 1)  # the last line has no newline
        self._report_dropped(upto_line=self.lines_done + 2)

    def _continue_header(self, chunk: bytes, pos: int = 0) -> int:
        """Adds the header line's text from pos; where it ends: the next line's start, or -1
        when the line goes on in the next chunk."""
        newline = chunk.find(b"\n", pos)
        if newline < 0:
            self.header_parts.append(chunk[pos:])
            self.at_line_start = False
            return -1
        self.header_parts.append(chunk[pos:newline])
        self.lines_done += 1
        self.at_line_start = True
        self.column = self.lead = 0
        self.line_started = False
        return newline + 1

    def _end_header(self) -> Iterator[Header | bytes]:
        """The '>' line read: a Header, but a line starting '>?' is a gap in the sequence
        (_gap), and '>?_' starts a defline as '>' does, as BLAST's FASTA reader reads them."""
        parts, self.header_parts = self.header_parts, None
        text = (parts[0] if len(parts) == 1 else b"".join(parts)).rstrip(b"\r")
        if text.startswith(b"?"):
            if not text.startswith(b"?_"):
                yield from self._gap(text[1:])
                return
            text = text[2:]
        self.unchecked = self.report_dropped is not None
        self.first_line = b""
        self.in_record = True
        yield Header(text, self.header_line)

    def _gap(self, spec: bytes) -> Iterator[Header | bytes]:
        """CFastaReader::ParseGapLine: '>?N' or '>?unkN' is a gap of N letters, N here; a
        size it cannot read is a gap of one letter, with its warnings."""
        spec = spec.strip(WHITESPACE)
        if spec.startswith(b"unk"):
            spec = spec[3:].lstrip(WHITESPACE)
        digits = len(spec) - len(spec.lstrip(b"0123456789"))
        size = int(spec[:digits]) if digits else 0
        warn = self.report_dropped or (lambda text: None)
        if size <= 0:
            warn(f"CFastaReader: Bad gap size at line {self.header_line}")
            size = 1
        if spec[digits:].strip(WHITESPACE):
            warn(f"CFastaReader: Problem parsing gap mods at line {self.header_line}")
        if not self.in_record:  # a gap before any defline starts a record without one
            self.in_record = True
            yield Header(b"", self.header_line)
        yield b"N" * size

    def _next_header(self, chunk: bytes, pos: int) -> int:
        """Start of the next '>' line after pos (or the chunk's end); '>' is rare in sequence
        data, so a plain byte search (memchr) and a look at the byte before beats a 2-byte find."""
        while True:
            at = chunk.find(b">", pos + 1)
            if at < 0:
                return len(chunk)
            if chunk[at - 1] == 0x0A:
                return at
            pos = at

    def _sequence_text(self, text: bytes) -> Iterator[Header | bytes]:
        raw = text
        if self.unchecked:
            self._check_plausible(text)
        if self.report_dropped is not None and (self.in_comment
                                                or text.translate(None, self.allowed)):
            text = self._without_dropped(text)
        elif self.validate and text.translate(None, self.allowed):
            self._invalid_byte(text)
        self._advance_line(raw)
        letters = text.translate(None, WHITESPACE)
        if self.dropped or self.hyphen_lines:  # lines this text ended
            self._report_dropped(upto_line=self._line_of(raw, len(raw)))
        if letters and not self.seen_header:
            first_letter = self._line_of(text, len(text) - len(text.lstrip()))
            if not self.headerless_ok:
                self._text_before_header(first_letter)
            self.seen_header = self.in_record = True
            yield Header(b"", first_letter)
        self.lines_done += text.count(b"\n")
        self.at_line_start = text.endswith(b"\n")
        if letters:
            yield letters

    def _advance_line(self, raw: bytes) -> None:
        """The line state after `raw`: bytes of the current line, whether one is not blank,
        and the blanks that start it."""
        last_newline = raw.rfind(b"\n")
        if last_newline >= 0:
            self.column = self.lead = 0
            self.line_started = False
        tail = raw[last_newline + 1:]
        self.column += len(tail)
        if not self.line_started:
            solid = tail.lstrip(BLANKS)
            self.lead += len(tail) - len(solid)
            self.line_started = bool(solid)

    def _check_plausible(self, text: bytes) -> None:
        """CFastaReader::CheckDataLine on each data line of the record while it has no
        letter: the line's first bytes (at most PLAUSIBLE_CHECKED of the line without its
        blanks at either end) must look like sequence. Only the start of each line is kept."""
        pos = 0
        while self.unchecked and pos < len(text):
            newline = text.find(b"\n", pos)
            end = len(text) if newline < 0 else newline
            if len(self.first_line) <= 2 * PLAUSIBLE_CHECKED:
                part = text[pos:min(end, pos + 2 * PLAUSIBLE_CHECKED + 1)]
                self.first_line += part if self.first_line else part.lstrip(BLANKS)
            if newline < 0:
                return
            self._check_first_line(self.lines_done + text.count(b"\n", 0, newline) + 1)
            pos = newline + 1

    def _check_first_line(self, number: int) -> None:
        line, self.first_line = self.first_line.rstrip(WHITESPACE), b""
        if not line or line[0] in COMMENT_LINE_MARKS:
            return
        # counted with bytes.translate: a file of short reads checks a line per record
        looked_at = line[:PLAUSIBLE_CHECKED].split(b";", 1)[0]
        plausible = len(looked_at) - len(looked_at.translate(None, _PLAUSIBLE))
        neutral = len(looked_at) - len(looked_at.translate(None, _NEUTRAL))
        hyphens = looked_at.count(b"-")  # sequence (a gap), but neutral where blastn drops it
        good = plausible + (0 if self.blast_input else hyphens)
        bad = len(looked_at) - plausible - neutral - hyphens
        checked = min(len(line), PLAUSIBLE_CHECKED)
        if bad >= good // 3 and (checked > 3 or good == 0 or bad > good):
            raise InputError(f"{self.source}:{number}: CFastaReader: Near line {number}, "
                             "there's a line that doesn't look like plausible data, but it's "
                             "not marked as defline or comment.")
        residues = line.split(b";", 1)[0].translate(None, WHITESPACE)
        self.unchecked = len(residues.translate(None, self.allowed)) == len(residues)

    def _without_dropped(self, text: bytes) -> bytes:
        """`text` without the bytes BLAST's FASTA reader ignores: those outside the alphabet
        (each reported, by line and column, when its line ends; columns count from the
        line's first byte that is not blank), hyphens for blast_input (each line with one
        reported), the comments (from a ';' to the line's end, and lines starting with '!',
        '#' or ';'). Newlines stay."""
        codes = np.frombuffer(text, dtype=np.uint8)
        newline = codes == 0x0A
        line = np.cumsum(newline) - newline  # of each byte: its line, 0 for the text's first
        line_start = np.concatenate(([0], np.flatnonzero(newline) + 1))
        first_solid = np.full(line_start.size, codes.size, dtype=np.int64)
        solid = np.flatnonzero(~_BLANK[codes] & ~newline)
        np.minimum.at(first_solid, line[solid], solid)
        lead = first_solid - line_start
        lead[0] = self.lead if self.line_started else self.column + first_solid[0]
        column = np.arange(codes.size) - line_start[line] - lead[line] + 1
        column[line == 0] += self.column
        comment = self._commented(codes, line, newline, first_solid)
        hyphen = (codes == HYPHEN) & ~comment if self.blast_input else np.zeros(codes.size, bool)
        bad = ~self.allowed_table[codes] & ~comment & ~hyphen
        bad_lines, bad_columns = line[bad] + self.lines_done + 1, column[bad]
        breaks = np.flatnonzero(np.diff(bad_lines)) + 1
        for lines, columns in zip(np.split(bad_lines, breaks), np.split(bad_columns, breaks)):
            if lines.size:
                self.dropped.setdefault(int(lines[0]), []).extend(columns.tolist())
        self.hyphen_lines.update((np.unique(line[hyphen]) + self.lines_done + 1).tolist())
        self._report_dropped(upto_line=self.lines_done + 1 + int(newline.sum()))
        return codes[~(bad | comment | hyphen)].tobytes()

    def _commented(self, codes, line, newline, first_solid) -> np.ndarray:
        """Which bytes are comments: from a line's first ';' to its end, and the whole of a
        line whose first byte that is not blank is a comment mark (a comment the last text
        left open takes the first line whole)."""
        lines = first_solid.size
        first = np.full(lines, codes.size, dtype=np.int64)
        semicolons = np.flatnonzero(codes == COMMENT)
        np.minimum.at(first, line[semicolons], semicolons)
        marked = first_solid < codes.size
        marked[marked] = _COMMENT_LINE_MARK[codes[first_solid[marked]]]
        if self.line_started:
            marked[0] = False  # the line's start was in an earlier text
        first = np.where(marked, np.minimum(first, first_solid), first)
        if self.in_comment:
            first[0] = 0
        self.in_comment = bool(first[-1] < codes.size)  # the last line goes on in the next text
        return (np.arange(codes.size) >= first[line]) & ~newline

    def _report_dropped(self, upto_line: int) -> None:
        """BLAST's warnings for each line before `upto_line` that had bytes dropped: its
        hyphens, then its other bytes."""
        done = sorted(n for n in set(self.dropped) | self.hyphen_lines if n < upto_line)
        for number in done:
            if number in self.hyphen_lines:
                self.hyphen_lines.discard(number)
                self.report_dropped("CFastaReader: Hyphens are invalid and will be ignored "
                                    f"around line {number}")
            if number in self.dropped:
                self.report_dropped("FASTA-Reader: Ignoring invalid residues at position(s): "
                                    f"On line {number}: {_ranges(self.dropped.pop(number))}")

    def _line_of(self, text: bytes, offset: int) -> int:
        return self.lines_done + text.count(b"\n", 0, offset) + 1

    def _invalid_byte(self, text: bytes) -> None:
        codes = np.frombuffer(text, dtype=np.uint8)
        bad = int(np.argmin(self.allowed_table[codes]))
        if not self.seen_header and not self.headerless_ok:
            self._text_before_header(self._line_of(text, bad))
        raise InputError(f"{self.source}:{self._line_of(text, bad)}: invalid character "
                         f"'{_describe_byte(int(codes[bad]))}' in a sequence")

    def _text_before_header(self, line: int) -> None:
        raise InputError(f"{self.source}:{line}: text before the first '>' "
                         f"(not a FASTA file?)")


TITLE_WARNING = ("FASTA-Reader: Title ends with at least 20 valid nucleotide characters.  "
                 "Was the sequence accidentally put in the title line?")


def title_ends_with_sequence(defline: str) -> bool:
    """CFastaReader's test of a record's defline (as it came, trailing blanks kept), made
    once its letters are read: longer than 20 characters, the last 20 of them A, C, G, T."""
    return len(defline) > 20 and not defline[-20:].strip("ACGTacgt")


def reader_warning(text: str) -> None:
    """A warning of BLAST's FASTA reader about a -query or -subject sequence, on stderr as
    blastn writes it."""
    print(text, file=sys.stderr)


def open_binary(source: str | os.PathLike) -> BinaryIO:
    """A binary stream of `source` ('-' = stdin), gunzipped when it starts with gzip's magic."""
    name = os.fspath(source)
    if name == "-":
        raw = sys.stdin.buffer
        return gunzipped(raw if hasattr(raw, "peek") else io.BufferedReader(raw))
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


def gunzipped(stream: BinaryIO) -> BinaryIO:
    """A binary stream that can peek (stdin, the queries a served search receives), read
    through gzip when it starts with gzip's magic."""
    if stream.peek(2)[:2] == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=stream, mode="rb")
    return stream


def _read_chunks(stream: BinaryIO, name: str, chunk_bytes: int) -> Iterator[bytes]:
    while True:
        try:
            chunk = stream.read(chunk_bytes)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(f"{name}: cannot read ({exc})") from None
        if not chunk:
            return
        yield chunk


def iter_fasta(source: str | os.PathLike | BinaryIO, validate: bool = True,
               headerless_ok: bool = False, chunk_bytes: int = CHUNK_BYTES,
               report_dropped=None, blast_input: bool = False,
               name: str | None = None) -> Iterator[Header | bytes]:
    """A FASTA file (plain or gzip, detected by magic bytes; '-' reads stdin), or an open
    binary stream of FASTA text (named `name` in messages, '<text>' without one), as a
    stream of Header items, each followed by its sequence's letters in pieces (bytes,
    whitespace removed, case kept). Memory holds one chunk of `chunk_bytes` at a time,
    whatever the lines' lengths.

    With `validate`, a letter outside IUPAC (ACGTURYKMSWBDHVN, either case, and '-') raises
    InputError naming file and line; with `report_dropped` (a function taking a warning's
    text) it is dropped instead, as makeblastdb drops it, and so is a comment (';' to the
    line's end, or a line starting with '!', '#' or ';'), and a record's first data line
    that does not look like sequence is an InputError in the reader's words. Letters before
    the first '>' raise InputError unless `headerless_ok`, which puts a Header with an
    empty defline before them (as BLAST reads a bare query sequence). `blast_input` reads
    as blastn reads -query and -subject, where makeblastdb's reading keeps a hyphen (a gap,
    read as N): it is dropped, each line with one reported. A '>?N' line is a gap of N
    letters (N), as in both.
    """
    own_stream = not hasattr(source, "read")
    name = name or _source_name(source)
    tokenizer = _Tokenizer(name, validate, headerless_ok, report_dropped, blast_input)
    stream = open_binary(source) if own_stream else source
    try:
        for chunk in _read_chunks(stream, name, chunk_bytes):
            yield from tokenizer.feed(chunk)
        yield from tokenizer.close()
    finally:
        if own_stream and stream is not sys.stdin.buffer:
            stream.close()


def iter_records(source: str | os.PathLike | BinaryIO, validate: bool = True,
                 headerless_ok: bool = False, header_errors: str = "replace",
                 chunk_bytes: int = CHUNK_BYTES, report_dropped=None,
                 blast_input: bool = False, name: str | None = None) -> Iterator[Record]:
    """The records of `iter_fasta(...)`, each with all its letters (one record in memory
    at a time). `header_errors` is how bytes that are not UTF-8 are decoded in deflines:
    "replace" (U+FFFD) or "surrogateescape" (kept, to be written back as they came)."""
    name = name or _source_name(source)
    header: Header | None = None
    pieces: list[bytes] = []
    for item in iter_fasta(source, validate, headerless_ok, chunk_bytes, report_dropped,
                           blast_input, name):
        if isinstance(item, Header):
            if header is not None:
                yield _record(header, pieces, name, header_errors)
            header, pieces = item, []
        else:
            pieces.append(item)
    if header is not None:
        yield _record(header, pieces, name, header_errors)


def _source_name(source) -> str:
    return "<text>" if hasattr(source, "read") else os.fspath(source)


def _record(header: Header, pieces: list[bytes], name: str, header_errors: str) -> Record:
    joined = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    return Record(defline=header.defline.decode("utf-8", header_errors),
                  letters=np.frombuffer(joined, dtype=np.uint8), line=header.line, source=name)


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
