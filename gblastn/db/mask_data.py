"""The masking data of makedb -mask_data: the files dustmasker and windowmasker write with
-outfmt maskinfo_asn1_bin or maskinfo_asn1_text, read as makeblastdb reads them
(asn/blastdb.asn of the NCBI toolkit):

    Blast-db-mask-info ::= SEQUENCE { algo-id [0] INTEGER, algo-program [1] INTEGER,
                                      algo-options [2] VisibleString, masks [3] Blast-mask-list }
    Blast-mask-list ::= SEQUENCE { masks [0] SEQUENCE OF Seq-loc, more [1] BOOLEAN }

A file holds one Blast-db-mask-info, then, while `more` is set, further Blast-mask-lists.
Each Seq-loc masks one sequence: an interval [from, to] (int), a list of them (packed-int)
or a mix of these, each interval naming the sequence by its Seq-id. The ranges of a
database sequence are those of the Seq-locs that name one of its Seq-ids (seqid.
record_seq_ids); each file is one masking algorithm, whose id (what -db_soft_mask and
-db_hard_mask select) is given as makeblastdb's CMaskInfoRegistry gives it.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from ..errors import InputError, OptionsError
from .blast_deflines import (CONTEXT_CONSTRUCTED, BerError, ber_constructed, ber_element,
                             ber_explicit, ber_fields, ber_string, seq_id_text)

UNIVERSAL_BOOLEAN, UNIVERSAL_INTEGER, UNIVERSAL_ENUMERATED = 0x01, 0x02, 0x0A
# EBlast_filter_program: each program's ids run from its own number to the next program's;
# dust, seg and windowmasker data made with default options (none named) take the first
PROGRAMS = {"dust": 10, "seg": 20, "windowmasker": 30, "repeat": 40, "other": 100}
PROGRAM_MAX = 255
_ID_RANGE_END = {10: 20, 20: 30, 30: 40, 40: 100, 100: PROGRAM_MAX}
_DEFAULT_OPTIONS_FIRST = (10, 20, 30)
# Seq-loc alternatives (seqloc.asn) that carry ranges; null and empty carry none
SEQ_LOC_NULL, SEQ_LOC_EMPTY, SEQ_LOC_INT, SEQ_LOC_PACKED_INT, SEQ_LOC_MIX = 0, 1, 3, 4, 7


class MaskFile(NamedTuple):
    """One masking data file: its program (EBlast_filter_program), options, and the masked
    ranges [start, end) of each Seq-id it names (lower-cased FASTA form), in its order."""

    path: str
    program: int
    options: str
    ranges: dict


def read_mask_file(path: str) -> MaskFile:
    """A maskinfo_asn1_bin or maskinfo_asn1_text file; InputError naming it when it is
    neither, or damaged."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the mask data ({exc.strerror})") from None
    text = data.lstrip()
    try:
        if data[:1] == b"\x30":
            objects = _ber_objects(data)
        elif text.startswith(b"Blast-db-mask-info"):
            objects = _TextAsn(text.decode("latin-1")).objects()
        else:
            raise InputError(f"Unknown encoding for mask data in '{path}'")
        return _mask_file(path, objects)
    except (BerError, ValueError, KeyError, IndexError, TypeError, RecursionError) as exc:
        raise InputError(f"{path}: damaged mask data ({exc})") from None


def _mask_file(path: str, objects: list) -> MaskFile:
    """The file from its objects, each (program, options, Seq-locs, more) with program and
    options None after the first (a Blast-mask-list)."""
    program, options, locations, more = objects[0]
    if program is None:
        raise ValueError("no Blast-db-mask-info")
    ranges: dict[str, list] = {}
    for _, _, more_locations, next_more in objects[1:]:
        if not more:
            raise ValueError("data after the last Blast-mask-list")
        locations += more_locations
        more = next_more
    if more:
        raise ValueError("truncated (a Blast-mask-list announced is missing)")
    for seq_id, location in locations:
        ranges.setdefault(seq_id, []).append(location)
    return MaskFile(path, program, options,
                    {seq_id: _combined(parts) for seq_id, parts in ranges.items()})


def _combined(parts: list) -> np.ndarray:
    """One Seq-loc's ranges as given; those of several sorted and merged where they overlap
    or abut, as makeblastdb combines Seq-locs (fMerge_All | fSort)."""
    if len(parts) == 1:
        return parts[0]
    ranges = np.concatenate(parts)
    ranges = ranges[np.lexsort((ranges[:, 1], ranges[:, 0]))]
    merged = [list(ranges[0])]
    for start, end in ranges[1:].tolist():
        if start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return np.array(merged, dtype=np.int64)


# -- ASN.1 binary (BER) ---------------------------------------------------------------------

def _ber_objects(data: bytes) -> list:
    """The file's objects, walked one Seq-loc at a time: a file of a genome's masks holds
    millions of intervals, whose element tree at once would take gigabytes."""
    objects, pos = [], 0
    while pos < len(data):
        inner, end = _enter(data, pos, len(data), 0x30)
        program = options = None
        first_field, _ = _enter(data, inner, end, 0xA0)
        if data[first_field] != 0x30:  # algo-id, not masks: a Blast-db-mask-info
            fields = []
            for tag in (0xA0, 0xA1, 0xA2):
                element, inner = ber_element(data, inner, _limit(data, end))
                if element[0] != tag:
                    raise BerError(f"expected tag {tag:#x}, found {element[0]:#x}")
                fields.append(ber_explicit(element))
            program, options = _ber_number(fields[1]), ber_string(fields[2])
            masks_at, masks_end = _enter(data, inner, end, 0xA3)
            list_at, list_end = _enter(data, masks_at, masks_end, 0x30)
            locations, more, list_at = _ber_mask_list(data, list_at, list_end)
            inner = _leave(data, _leave(data, list_at, list_end), masks_end)
        else:
            locations, more, inner = _ber_mask_list(data, inner, end)
        pos = _leave(data, inner, end)
        objects.append((program, options, locations, more))
    if not objects:
        raise ValueError("empty")
    return objects


def _ber_mask_list(data: bytes, pos: int, end) -> tuple:
    """(locations, more, where the Blast-mask-list's fields end) of the fields at `pos`."""
    field_at, field_end = _enter(data, pos, end, 0xA0)
    item_at, items_end = _enter(data, field_at, field_end, 0x30)
    locations = []
    while not _at_end(data, item_at, items_end):
        if data[item_at] == CONTEXT_CONSTRUCTED | SEQ_LOC_PACKED_INT:
            intervals, item_at = _ber_packed_intervals(data, item_at, items_end)
        else:
            location, item_at = ber_element(data, item_at, _limit(data, items_end))
            intervals = _ber_intervals(location)
        locations.append(_location(intervals))
    pos = _leave(data, _leave(data, item_at, items_end), field_end)
    more = False
    if not _at_end(data, pos, end):
        element, pos = ber_element(data, pos, _limit(data, end))
        more = element[0] == 0xA1 and _ber_boolean(ber_explicit(element))
    return locations, more, pos


def _ber_packed_intervals(data: bytes, pos: int, end) -> tuple:
    """(intervals, where it ends) of the packed-int Seq-loc at `pos`, read an interval at
    a time (one can hold a chromosome's)."""
    choice_at, choice_end = _enter(data, pos, end, CONTEXT_CONSTRUCTED | SEQ_LOC_PACKED_INT)
    item_at, items_end = _enter(data, choice_at, choice_end, 0x30)
    intervals = []
    while not _at_end(data, item_at, items_end):
        interval, item_at = ber_element(data, item_at, _limit(data, items_end))
        intervals.append(_ber_interval(interval))
    return intervals, _leave(data, _leave(data, item_at, items_end), choice_end)


def _enter(data: bytes, pos: int, end, tag: int) -> tuple:
    """(where its contents start, where they end, None for an indefinite length) of the
    element at `pos`, which must have that tag."""
    limit = _limit(data, end)
    if pos + 2 > limit or data[pos] != tag:
        raise BerError(f"expected tag {tag:#x} at byte {pos}")
    size = data[pos + 1]
    if size == 0x80:
        return pos + 2, None
    width = size & 0x7F if size & 0x80 else 0
    if width > 4 or pos + 2 + width > limit:
        raise BerError("bad length")
    length = int.from_bytes(data[pos + 2:pos + 2 + width], "big") if width else size
    start = pos + 2 + width
    if start + length > limit:
        raise BerError("element runs past its end")
    return start, start + length


def _limit(data: bytes, end) -> int:
    return len(data) if end is None else end


def _at_end(data: bytes, pos: int, end) -> bool:
    if end is not None:
        return pos >= end
    if pos + 2 > len(data):
        raise BerError("missing end of contents")
    return data[pos] == 0 and data[pos + 1] == 0


def _leave(data: bytes, pos: int, end) -> int:
    """Where the element whose contents end at `pos` ends."""
    if not _at_end(data, pos, end) or (end is not None and pos != end):
        raise BerError(f"unexpected data at byte {pos}")
    return pos if end is not None else pos + 2


def _ber_number(element) -> int:
    tag, content = element
    if tag not in (UNIVERSAL_INTEGER, UNIVERSAL_ENUMERATED) or isinstance(content, list):
        raise BerError("expected an INTEGER")
    return int.from_bytes(content, "big", signed=True)


def _ber_boolean(element) -> bool:
    tag, content = element
    if tag != UNIVERSAL_BOOLEAN or isinstance(content, list):
        raise BerError("expected a BOOLEAN")
    return any(content)


def _ber_intervals(location) -> list:
    """(Seq-id, start, end) of each Seq-interval of a Seq-loc."""
    choice = location[0] - CONTEXT_CONSTRUCTED
    if choice in (SEQ_LOC_NULL, SEQ_LOC_EMPTY):
        return []
    inner = ber_explicit(location)
    if choice == SEQ_LOC_INT:
        return [_ber_interval(inner)]
    if choice == SEQ_LOC_PACKED_INT:
        return [_ber_interval(item) for item in ber_constructed(inner, 0x30)]
    if choice == SEQ_LOC_MIX:
        return [found for item in ber_constructed(inner, 0x30)
                for found in _ber_intervals(item)]
    raise BerError(f"Seq-loc choice {choice} is not a masked range")


def _ber_interval(element) -> tuple:
    fields = ber_fields(element)
    return _interval(seq_id_text(fields[3]), _ber_number(fields[0]), _ber_number(fields[1]))


def _interval(seq_id: str, first: int, last: int) -> tuple:
    if not 0 <= first <= last:
        raise ValueError(f"interval {first}-{last} of {seq_id}")
    return seq_id.lower(), first, last + 1


def _location(intervals: list) -> tuple:
    """(Seq-id, ranges int64 [k, 2] in the Seq-loc's order) of a Seq-loc's intervals, which
    name one sequence (makeblastdb refuses a Seq-loc of none or of several)."""
    seq_ids, starts, ends = zip(*intervals) if intervals else ((), (), ())
    if len(set(seq_ids)) != 1:
        raise ValueError("Cannot get masked range Seq-id")
    return seq_ids[0], np.stack([np.array(starts, dtype=np.int64),
                                 np.array(ends, dtype=np.int64)], axis=1)


# -- ASN.1 text -----------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(::=|[{},]|"(?:[^"]|"")*"|-?\d+|[A-Za-z][A-Za-z0-9-]*)')
# Seq-id alternatives of text ASN.1 in FASTA form
_TEXT_SEQ_IDS = {"genbank": "gb", "embl": "emb", "pir": "pir", "swissprot": "sp",
                 "other": "ref", "ddbj": "dbj", "prf": "prf", "tpg": "tpg", "tpe": "tpe",
                 "tpd": "tpd", "gpipe": "gpp", "named-annot-track": "nat"}


class _Name(str):
    """A bare identifier value of text ASN.1 (an enumeration's name, TRUE, NULL)."""


class _TextAsn:
    """Text ASN.1 values: '{' values '}' (a SEQUENCE's fields or a SEQUENCE OF's items),
    numbers, strings, bare names, and 'name value' (a field or a CHOICE), as a (name,
    value) pair. The text is read a token at a time and the masks a Seq-loc at a time (a
    file of a genome's masks holds millions of intervals)."""

    def __init__(self, text: str):
        self._tokens = _tokens(text)
        self._ahead = next(self._tokens, None)

    def _next(self) -> str:
        token = self._ahead
        if token is None:
            raise ValueError("ends early")
        self._ahead = next(self._tokens, None)
        return token

    def _expect(self, expected: str) -> None:
        token = self._next()
        if token != expected:
            raise ValueError(f"expected {expected!r}, found {token!r}")

    def _value(self):
        token = self._next()
        if token == "{":
            items = []
            while self._ahead != "}":
                items.append(self._value())
                if self._ahead == ",":
                    self._next()
            self._next()
            return items
        if token[0] == '"':
            return token[1:-1].replace('""', '"')
        if token[0].isdigit() or token[0] == "-":
            return int(token)
        if self._ahead in (",", "}", None):
            return _Name(token)
        return token, self._value()

    def objects(self) -> list:
        found = []
        while self._ahead is not None:
            kind = self._next()
            self._expect("::=")
            self._expect("{")
            program = options = None
            if kind == "Blast-db-mask-info":
                fields = {}
                for name in ("algo-id", "algo-program", "algo-options"):
                    self._expect(name)
                    fields[name] = self._value()
                    self._expect(",")
                name = fields["algo-program"]
                program = PROGRAMS[name] if isinstance(name, _Name) else int(name)
                options = fields["algo-options"]
                self._expect("masks")
                self._expect("{")
                locations, more = self._mask_list()
                self._expect("}")
            elif kind == "Blast-mask-list":
                locations, more = self._mask_list()
            else:
                raise ValueError(f"{kind} is no masking data")
            self._expect("}")
            found.append((program, options, locations, more))
        if not found:
            raise ValueError("empty")
        return found

    def _mask_list(self) -> tuple:
        """(locations, more) of a Blast-mask-list's fields."""
        self._expect("masks")
        self._expect("{")
        locations = []
        while self._ahead != "}":
            locations.append(_location(_text_intervals(self._value())))
            if self._ahead == ",":
                self._next()
        self._next()
        more = False
        if self._ahead == ",":
            self._next()
            self._expect("more")
            more = self._value() == "TRUE"
        return locations, more


def _tokens(text: str):
    pos, end = 0, len(text.rstrip())
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"unreadable text at character {pos}")
        yield match.group(1)
        pos = match.end()


def _text_intervals(location) -> list:
    choice, value = location
    if choice in ("null", "empty"):
        return []
    if choice == "int":
        return [_text_interval(value)]
    if choice == "packed-int":
        return [_text_interval(item) for item in value]
    if choice == "mix":
        return [found for item in value for found in _text_intervals(item)]
    raise ValueError(f"Seq-loc {choice} is not a masked range")


def _text_interval(fields) -> tuple:
    fields = dict(fields)
    return _interval(_text_seq_id(fields["id"]), fields["from"], fields["to"])


def _text_seq_id(seq_id) -> str:
    choice, value = seq_id
    if choice == "local":
        return f"lcl|{value[1]}"
    if choice == "gi":
        return f"gi|{value}"
    if choice == "general":
        fields = dict(value)
        return f"gnl|{fields['db']}|{fields['tag'][1]}"
    if choice == "pdb":
        fields = dict(value)
        chain = fields["chain-id"] if "chain-id" in fields else chr(fields.get("chain", 32))
        return f"pdb|{fields['mol']}|{chain.strip()}"
    if choice in _TEXT_SEQ_IDS:
        fields = dict(value)
        accession = fields.get("accession", "")
        if accession and fields.get("version", 0) > 0:
            accession += f".{fields['version']}"
        return f"{_TEXT_SEQ_IDS[choice]}|{accession}|{fields.get('name', '')}"
    raise ValueError(f"Seq-id {choice} is not read")


# -- algorithm ids and the ranges of each sequence ------------------------------------------

class MaskData:
    """The masking data of a build: each file's algorithm id and, for a sequence's Seq-ids,
    the ranges each algorithm masks. `algorithms`: algorithm id -> (name, options), the name
    the program's (or the file's -mask_id), as the pairwise report names them."""

    def __init__(self, files: list[MaskFile], mask_ids: list[str] | None = None):
        self.files = files
        self.algorithm_ids = _register(files, mask_ids)
        self.algorithms = {
            algorithm_id: (mask_ids[number] if mask_ids else _program_name(mask.program),
                           mask.options)
            for number, (algorithm_id, mask) in enumerate(zip(self.algorithm_ids, files))}
        self.matched = False

    def ranges_of(self, seq_ids: list[str], length: int, where: str) -> dict:
        """Each algorithm's ranges [start, end) of the sequence those Seq-ids name, int32
        [k, 2] (empty when its file names none of them); InputError for a range past the
        sequence's end, as makeblastdb refuses it."""
        found = {}
        for algorithm_id, mask in zip(self.algorithm_ids, self.files):
            parts = [mask.ranges[seq_id] for seq_id in seq_ids if seq_id in mask.ranges]
            ranges = _combined(parts) if parts else np.zeros((0, 2), dtype=np.int64)
            if ranges.size and int(ranges[:, 1].max()) > length:
                raise InputError(f"{where}: {mask.path}: Masked data offsets out of bounds "
                                 f"(a range past the sequence's {length} letters)")
            self.matched = self.matched or bool(parts)
            found[algorithm_id] = ranges.astype(np.int32)
        return found


def _program_name(program: int) -> str:
    return next(name for name, number in PROGRAMS.items() if number == program)


def _register(files: list[MaskFile], mask_ids: list[str] | None) -> list[int]:
    """Each file's algorithm id, as CMaskInfoRegistry assigns them: with -mask_id from 100
    on, else in its program's range (dust 10-19, seg 20-29, windowmasker 30-39, repeat
    40-99, other 100-254), the program's own number for data made with default options;
    OptionsError in makeblastdb's words for what it refuses."""
    used: set[int] = set()
    seen: set = set()
    ids = []
    for number, mask in enumerate(files):
        if mask.program not in _ID_RANGE_END:
            raise OptionsError(f"{mask.path}: Invalid filtering program: {mask.program}")
        key = mask_ids[number] if mask_ids else (mask.program, mask.path, mask.options)
        if key in seen:
            raise OptionsError("Duplicate masking algorithm found.")
        seen.add(key)
        program = 100 if mask_ids else mask.program
        if not mask_ids and program in _DEFAULT_OPTIONS_FIRST and not mask.options:
            if program in used:
                raise OptionsError("Masking algorithm with default arguments already provided")
            algorithm_id = program
        else:
            first = program if mask_ids or program not in _DEFAULT_OPTIONS_FIRST else program + 1
            algorithm_id = next((i for i in range(first, _ID_RANGE_END[program])
                                 if i not in used), None)
            if algorithm_id is None:
                raise OptionsError(f"Too many IDs in range {first}-{_ID_RANGE_END[program]}")
        used.add(algorithm_id)
        ids.append(algorithm_id)
    _refuse_repeated_algorithms(files, mask_ids)
    return ids


def _refuse_repeated_algorithms(files: list[MaskFile], mask_ids: list[str] | None) -> None:
    """Two files of one program and options make a database BLAST cannot read (SeqDB
    refuses the repeated algorithm): refused here, naming both."""
    if mask_ids:
        return
    first: dict = {}
    for mask in files:
        other = first.setdefault((mask.program, mask.options), mask.path)
        if other != mask.path:
            raise OptionsError(f"{other} and {mask.path}: masking data of one algorithm with "
                               "the same options (a database BLAST cannot read)")


def read_mask_data(paths: list[str], mask_ids: list[str] | None = None) -> MaskData:
    """-mask_data's files (with -mask_id's names), read and checked before the build."""
    paths = [path for path in paths if path]
    if not paths:
        raise OptionsError("mask_data option found, but no files were specified.")
    if mask_ids is not None and len(mask_ids) != len(paths):
        raise OptionsError("the size of mask_id does not match that of mask_data.")
    return MaskData([read_mask_file(path) for path in paths], mask_ids)
