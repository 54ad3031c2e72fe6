"""Tabular lines written as bytes by compiled code, a column at a time.

Formatting a large search's lines in Python (str() of the integers, the E-value, bit score
and percent formats, the joins) is the last step of a serial search, and GIL time that the
traceback threads wait for in the pipeline (docs/perf/output.md). Here Python only prepares
one array per column; the lines are written by one compiled call that does not hold the
GIL.

A column is one of:

* INT: a signed integer, as str();
* TEXT: an index into a table of byte strings (per-subject ids, strands, E-values: the
  E-value's "%.2e" needs exact decimal expansion of tiny numbers, so each distinct E-value
  is formatted once by Python and looked up here);
* FIXED: a float with a fixed number of decimals, as "%.Nf" prints it (pident, ppos): the
  exact binary value rounded half to even, worked out with integers;
* BITSCORE: BLAST's bit score format (format_bitscore): "%4.1f" up to 99.9, the integer part
  from there, and a TEXT entry ("%5.3e") above 99999.
"""

import math

import numpy as np

from ..arrays import grown
from ..numba_start import njit

INT = 0
TEXT = 1
FIXED = 2
BITSCORE = 3

BITS_AS_INTEGER = 99.9     # format_bitscore's thresholds
BITS_AS_EXPONENT = 99999.0


class LineColumns:
    """The columns of a block of `rows` lines, added in order (at most `columns` of them),
    gathered as arrays for write_lines."""

    def __init__(self, rows: int, columns: int):
        self.rows = rows
        self.kinds: list = []
        self.digits: list = []
        self.ints = np.zeros((columns, rows), dtype=np.int64)
        self.floats = np.zeros((columns, rows), dtype=np.float64)
        self.texts: list = []   # the shared table of byte strings

    def _add(self, kind, ints=None, floats=None, digits=0):
        c = len(self.kinds)
        self.kinds.append(kind)
        self.digits.append(digits)
        if ints is not None:
            self.ints[c] = ints
        if floats is not None:
            self.floats[c] = floats

    def _table(self, texts) -> int:
        """Add byte strings to the table; the index of the first."""
        first = len(self.texts)
        self.texts.extend(texts)
        return first

    def add_int(self, values) -> None:
        self._add(INT, ints=values)

    def add_text(self, texts: list, index) -> None:
        """Row i shows texts[index[i]] (str)."""
        first = self._table([text.encode("utf-8", "surrogateescape") for text in texts])
        self._add(TEXT, ints=first + np.asarray(index, dtype=np.int64))

    def add_repeated_text(self, texts: list, counts: list) -> None:
        """texts[j] on counts[j] consecutive rows."""
        self.add_text(texts, np.repeat(np.arange(len(texts)), counts))

    def add_fixed(self, values, digits: int) -> None:
        self._add(FIXED, floats=values, digits=digits)

    def add_formatted(self, values, format_value) -> None:
        """Each distinct value formatted once by `format_value`."""
        distinct, index = np.unique(np.asarray(values, dtype=np.float64), return_inverse=True)
        self.add_text([format_value(v) for v in distinct.tolist()], index)

    def add_bitscore(self, bits, format_value) -> None:
        bits = np.asarray(bits, dtype=np.float64)
        huge = bits > BITS_AS_EXPONENT
        index = None
        if huge.any():
            distinct, inverse = np.unique(bits[huge], return_inverse=True)
            index = np.zeros(self.rows, np.int64)
            index[huge] = self._table([format_value(v).encode() for v in distinct.tolist()]) \
                + inverse
        self._add(BITSCORE, ints=index, floats=bits, digits=1)

    def write(self, delimiter: str) -> str:
        """The lines, each ended by a newline."""
        return self.write_parts(delimiter, [self.rows])[0]

    def write_parts(self, delimiter: str, rows_of_part: list) -> list:
        """The lines cut into consecutive parts of the given numbers of rows: one text each."""
        if self.rows == 0:
            return ["" for _ in rows_of_part]
        offsets = np.zeros(len(self.texts) + 1, dtype=np.int64)
        offsets[1:] = [len(text) for text in self.texts]
        np.cumsum(offsets, out=offsets)
        table = np.frombuffer(b"".join(self.texts) or b" ", dtype=np.uint8)
        columns = len(self.kinds)
        out, line_end = write_lines(np.array(self.kinds, dtype=np.int64), self.ints[:columns],
                                    self.floats[:columns], np.array(self.digits, dtype=np.int64),
                                    table, offsets, np.frombuffer(delimiter.encode(), dtype=np.uint8))
        text = out.tobytes()
        last_row = np.cumsum(rows_of_part) - 1
        ends = [int(line_end[row]) if row >= 0 else 0 for row in last_row.tolist()]
        return [text[start:end].decode("utf-8", "surrogateescape")
                for start, end in zip([0] + ends[:-1], ends)]


def warm_up() -> None:
    """Write a line with a column of each kind: numba loads write_lines' machine code at its
    first call, which engine.warm_up makes ahead of the search's output."""
    lines = LineColumns(1, 4)
    lines.add_int([1])
    lines.add_text(["text"], [0])
    lines.add_fixed([1.5], 3)
    lines.add_bitscore([1.5], str)
    lines.write("\t")


@njit(cache=True, nogil=True)
def write_lines(kinds, ints, floats, digits, table, offsets, delimiter):
    """Rows of the columns (see the module's text), fields joined by `delimiter`, each line
    ended by a newline. Returns the bytes and where each line ends in them."""
    rows = ints.shape[1]
    out = np.empty(max(64, rows * 64), dtype=np.uint8)
    line_end = np.empty(rows, dtype=np.int64)
    size = 0
    for i in range(rows):
        for c in range(kinds.size):
            # room for any numeric field and the delimiter; a text is checked on its own
            need = size + 64 + delimiter.size
            kind = kinds[c]
            if kind == TEXT or (kind == BITSCORE and floats[c, i] > BITS_AS_EXPONENT):
                k = ints[c, i]
                need += offsets[k + 1] - offsets[k]
            if need > out.size:
                out = grown(out, need)
            if c > 0:
                for b in range(delimiter.size):
                    out[size + b] = delimiter[b]
                size += delimiter.size
            if kind == INT:
                size = _put_int(out, size, ints[c, i])
            elif kind == TEXT:
                size = _put_text(out, size, table, offsets, ints[c, i])
            elif kind == FIXED:
                size = _put_fixed(out, size, floats[c, i], digits[c], 0)
            else:
                size = _put_bitscore(out, size, floats[c, i], table, offsets, ints[c, i])
        out[size] = 10
        size += 1
        line_end[i] = size
    return out[:size], line_end


@njit(cache=True, nogil=True)
def _put_text(out, size, table, offsets, k):
    for b in range(offsets[k], offsets[k + 1]):
        out[size] = table[b]
        size += 1
    return size


@njit(cache=True, nogil=True)
def _put_digits(out, size, value, width, pad):
    """A non-negative integer with at least `width` characters, `pad` (a byte) in front."""
    n = 1
    probe = value
    while probe >= 10:
        probe //= 10
        n += 1
    for _ in range(width - n):
        out[size] = pad
        size += 1
    for k in range(n - 1, -1, -1):
        out[size + k] = 48 + value % 10
        value //= 10
    return size + n


@njit(cache=True, nogil=True)
def _put_int(out, size, value):
    if value < 0:
        out[size] = 45
        size += 1
        value = -value
    return _put_digits(out, size, value, 1, 48)


@njit(cache=True, nogil=True)
def _scaled_half_even(value, digits):
    """round(value * 10**digits) of a non-negative double, on its exact binary value, ties to
    even: what printf's "%.Nf" shows, as an integer (digits <= 3, value < 2**40)."""
    if value == 0.0:
        return 0
    mantissa, exponent = math.frexp(value)
    whole = np.uint64(mantissa * 9007199254740992.0)    # the 53 bits, exactly
    scaled = whole * np.uint64(10 ** digits)             # below 2**63 for digits <= 3
    shift = 53 - exponent
    if shift <= 0:
        return np.int64(scaled << np.uint64(-shift))
    if shift >= 64:
        return 0   # the value is below 2**-11: less than half a unit of the last decimal
    kept = scaled >> np.uint64(shift)
    rest = scaled & ((np.uint64(1) << np.uint64(shift)) - np.uint64(1))
    half = np.uint64(1) << np.uint64(shift - 1)
    if rest > half or (rest == half and kept % np.uint64(2) == np.uint64(1)):
        kept += np.uint64(1)
    return np.int64(kept)


@njit(cache=True, nogil=True)
def _put_fixed(out, size, value, digits, width):
    """"%{width}.{digits}f" of a double."""
    negative = math.copysign(1.0, value) < 0.0   # printf shows the sign of -0.0 too
    scaled = _scaled_half_even(-value if negative else value, digits)
    unit = np.int64(10 ** digits)
    whole = scaled // unit
    length = 1 + (1 + digits if digits > 0 else 0) + (1 if negative else 0)
    probe = whole
    while probe >= 10:
        probe //= 10
        length += 1
    for _ in range(width - length):
        out[size] = 32
        size += 1
    if negative:
        out[size] = 45
        size += 1
    size = _put_digits(out, size, whole, 1, 48)
    if digits > 0:
        out[size] = 46
        size = _put_digits(out, size + 1, scaled - whole * unit, digits, 48)
    return size


@njit(cache=True, nogil=True)
def _put_bitscore(out, size, bits, table, offsets, k):
    if bits > BITS_AS_EXPONENT:
        return _put_text(out, size, table, offsets, k)
    if bits > BITS_AS_INTEGER:
        return _put_digits(out, size, np.int64(bits), 3, 32)   # "%3d" of the C cast to long
    return _put_fixed(out, size, bits, 1, 4)
