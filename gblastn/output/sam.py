"""SAM: -outfmt 17, byte for byte as blastn 2.12 writes it (CBlast_SAM_Formatter over the
toolkit's CSAM_Formatter and CCIGAR_Formatter).

Each HSP is one record. By default the query is the reference and the subject the read:
a query's HSPs come sorted by their start on it (ties: the smaller E-value first), the
subject's letters outside the HSP are hard clips, and the header is sorted by coordinate
and grouped by reference. `-outfmt "17 SR"` turns it round: the subject is the reference,
the records keep the result's order. `SQ` adds the read's letters (else '*'). blastn holds
every record until the search ends, as the header lists each reference met before the
first record; so does this report: render() keeps each query's records, footer() writes
the file.

The tags are blastn's: AS the score, EV the E-value and BS the bit score (%g), NM the
letters in gaps (mismatches are not counted), PI the identities per aligned column without
gaps (%.2f; 100 only when every such column is identical, else at most 99.99).
"""

import threading
from dataclasses import dataclass, field

import numpy as np

from .. import __version__
from ..alphabet import decode_blastna, reverse_complement
from ..db.seqid import ids_parsed
from ..db.subjects import letters_before, whole_length
from ..query import local_id
from .alignments import GAP, shown_hsps

SUBJECT_AS_REFERENCE = "SR"
WITH_SEQUENCES = "SQ"
REVERSE_FLAG = 16
UNKNOWN_MAPPING_QUALITY = 255
HEADER_LINE = "@HD\tVN:1.2"
# blastn's grouping and sort order when the query is the reference; none the other way
QUERY_AS_REFERENCE_TAGS = "\tSO:coordinate\tGO:reference"
SUBJECT_AS_REFERENCE_TAGS = "\tGO:query"


@dataclass
class _QueryRecords:
    """One query's part of the file: its references (key, @SQ line) in the order its
    records meet them, and the records."""

    references: list
    lines: list


@dataclass
class SamReport:
    """-outfmt 17 with its words (`SR`, `SQ`, as blastn spells them; others are ignored)
    and the command line the @PG line names (none: no CL tag)."""

    says_empty_queries = True  # blastn writes no warning of them on stderr

    spec: str = ""
    command_line: str = ""
    ungapped: bool = False  # -ungapped: a subject's HSPs make one record (_JoinedHsps)
    # render() keeps the queries for footer(): a cluster search renders them where the
    # footer is written, not on its workers
    keeps_queries = True
    _queries: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __reduce__(self):
        """Sent to gblastn serve's process (which renders a served search's SAM) as its
        settings alone: the queries it keeps are its own."""
        return SamReport, (self.spec, self.command_line, self.ungapped)

    @property
    def subject_is_reference(self) -> bool:
        return SUBJECT_AS_REFERENCE in self.spec.split()

    @property
    def with_sequences(self) -> bool:
        return WITH_SEQUENCES in self.spec.split()

    def render(self, pairs: list, db) -> list:
        """Keeps each query's records for footer(); writes nothing yet. Queries come from
        several threads, in any order: each is kept under its number."""
        for query, result in pairs:
            records = self._query_records(query, result, db)
            with self._lock:
                self._queries[result.query_index] = records
        return [""] * len(pairs)

    def footer(self, db, count: int) -> str:
        """The whole file, from the queries kept since the last footer; nothing when no
        query has a hit, as blastn's."""
        with self._lock:
            queries = [self._queries[index] for index in sorted(self._queries)]
            self._queries.clear()
        if not any(records.lines for records in queries):
            return ""
        head = QUERY_AS_REFERENCE_TAGS if not self.subject_is_reference else \
            SUBJECT_AS_REFERENCE_TAGS
        lines = [HEADER_LINE + head, *_reference_lines(queries), self._program_line()]
        lines += [line for records in queries for line in records.lines]
        return "\n".join(lines) + "\n"

    def _program_line(self) -> str:
        line = f"@PG\tID:0\tVN:{__version__}"
        if self.command_line:
            line += f"\tCL:{self.command_line}"
        return line + "\tPN:gblastn"

    def _query_records(self, query, result, db) -> _QueryRecords:
        query_name = local_id(query, result.query_index)
        if self.ungapped:
            return self._joined_records(query, query_name, result, db)
        entries = [(subject.ordinal, hsp) for subject in result.subjects if len(subject.hsps)
                   for hsp in shown_hsps(query, db, subject)]
        if self.subject_is_reference:
            return self._subject_references(query, query_name, entries, db)
        entries.sort(key=lambda entry: (entry[1].query_start, entry[1].evalue))
        references = [(("query", query_name),
                       f"@SQ\tSN:{query_name}\tLN:{len(query)}")] if entries else []
        lines = [_record(subject_name(db, ordinal), query_name, hsp.query_start,
                         _query_reference_cigar(hsp), _subject_clips(hsp, db, ordinal),
                         self._subject_letters(hsp), hsp)
                 for ordinal, hsp in entries]
        return _QueryRecords(references, lines)

    def _subject_references(self, query, query_name, entries, db) -> _QueryRecords:
        references, lines = [], []
        for ordinal, hsp in entries:
            name = subject_name(db, ordinal)
            references.append((("subject", ordinal),
                               f"@SQ\tSN:{name}\tLN:{whole_length(db, ordinal)}"))
            position = min(hsp.subject_start, hsp.subject_end)
            lines.append(_record(query_name, name, position, _subject_reference_cigar(hsp),
                                 _query_clips(hsp, len(query)),
                                 self._query_letters(hsp, query), hsp))
        return _QueryRecords(references, lines)

    def _joined_records(self, query, query_name, result, db) -> _QueryRecords:
        """-ungapped: one record a subject, its HSPs joined (_JoinedHsps); with the query as
        the reference, sorted as blastn sorts them."""
        joined = [_JoinedHsps(subject.ordinal, shown_hsps(query, db, subject))
                  for subject in result.subjects if len(subject.hsps)]
        if self.subject_is_reference:
            references, lines = [], []
            for entry in joined:
                name = subject_name(db, entry.ordinal)
                references.append((("subject", entry.ordinal),
                                   f"@SQ\tSN:{name}\tLN:{whole_length(db, entry.ordinal)}"))
                letters = self._range_letters(query.codes, entry.query_range, entry.minus)
                lines.append(entry.record(query_name, name, entry.subject_range,
                                          entry.query_range, len(query), letters))
            return _QueryRecords(references, lines)
        joined.sort(key=lambda entry: (entry.sort_start, entry.last_evalue))
        references = [(("query", query_name),
                       f"@SQ\tSN:{query_name}\tLN:{len(query)}")] if joined else []
        lines = []
        for entry in joined:
            length = whole_length(db, entry.ordinal)
            letters = self._range_letters(None, entry.subject_range, entry.minus, db,
                                          entry.ordinal)
            lines.append(entry.record(subject_name(db, entry.ordinal), query_name,
                                      entry.query_range, entry.subject_range, length, letters))
        return _QueryRecords(references, lines)

    def _range_letters(self, codes, span: tuple, minus: bool, db=None, ordinal=0) -> str:
        """With SQ, the read's letters over the joined HSPs' whole span [first, end), of the
        query's `codes` or of the subject, on the reference's strand."""
        if not self.with_sequences:
            return "*"
        first, end = span
        if codes is None:  # the subject's, stored from its searched part on
            before = int(letters_before(db, [ordinal])[0])
            codes = db.blastna(ordinal, first - before, end - before)
        else:
            codes = codes[first:end]
        return decode_blastna(reverse_complement(codes) if minus else codes)

    def _subject_letters(self, hsp) -> str:
        """The subject's letters on the query's strand: the row without its gaps."""
        return hsp.subject_row.replace(GAP, "") if self.with_sequences else "*"

    def _query_letters(self, hsp, query) -> str:
        """The query's letters on the subject's plus strand."""
        if not self.with_sequences:
            return "*"
        codes = query.codes[hsp.query_start - 1:hsp.query_end]
        return decode_blastna(reverse_complement(codes) if hsp.minus else codes)


def subject_name(db, ordinal: int) -> str:
    """The subject as blastn's SAM names it: a database's sequence by its accession when
    makeblastdb parsed the ids, else by its ordinal (BL_ORD_ID:N); a -subject sequence as
    Subject_N, its place in the file."""
    from ..db.subjects import is_subject_set, subject_number

    if is_subject_set(db):
        return subject_number(db, ordinal)
    if ids_parsed(db, ordinal):
        return db.accession(ordinal)
    return f"BL_ORD_ID:{ordinal}"


class _JoinedHsps:
    """A subject's ungapped HSPs as blastn's SAM writes them, in one record: it joins them
    into one alignment of their segments in the report's order, whose first HSP gives the
    strand, the scores and the identities; the aligned columns are all the HSPs', and each
    sequence's span runs from the smallest start of an HSP to the largest end."""

    def __init__(self, ordinal: int, hsps: list):
        self.ordinal, self.first = ordinal, hsps[0]
        self.minus = self.first.minus
        self.columns = sum(hsp.length for hsp in hsps)
        self.query_range = (min(hsp.query_start for hsp in hsps) - 1,
                            max(hsp.query_end for hsp in hsps))
        self.subject_range = (min(min(hsp.subject_start, hsp.subject_end) for hsp in hsps) - 1,
                              max(max(hsp.subject_start, hsp.subject_end) for hsp in hsps))
        # blastn sorts by the smaller of the joined alignment's start and stop on the query
        # (SortHspByMasterStartAscending), which CDense_seg takes from the segments on the
        # strand of the first: the first segment's start and the last's stop, or, on the
        # minus strand, the last segment's start and the first's stop
        head, tail = (hsps[-1], self.first) if self.minus else (self.first, hsps[-1])
        self.sort_start = min(head.query_start, tail.query_start + tail.length - 1)
        # and then by the E-value it reads off the joined scores, where the last HSP's is
        # the one kept
        self.last_evalue = hsps[-1].evalue

    def record(self, read: str, reference: str, reference_range: tuple, read_range: tuple,
               read_length: int, letters: str) -> str:
        """The SAM line: the reference's span gives the position, the read's its clips."""
        first = self.first
        front, back = _clips(*read_range, read_length, self.minus)
        identities = first.identities if first.masked_identities is None \
            else first.masked_identities
        fields = [read, str(REVERSE_FLAG if self.minus else 0), reference,
                  str(reference_range[0] + 1), str(UNKNOWN_MAPPING_QUALITY),
                  f"{front}{self.columns}M{back}", "*", "0", "0", letters, "*",
                  f"AS:i:{first.score}", f"EV:f:{first.evalue:g}", "NM:i:0",
                  f"PI:f:{_percent(identities, self.columns)}", f"BS:f:{first.bitscore:g}"]
        return "\t".join(fields)


def _reference_lines(queries: list) -> list:
    """Each reference's @SQ line once, in the order the records meet them."""
    seen, lines = set(), []
    for records in queries:
        for key, line in records.references:
            if key not in seen:
                seen.add(key)
                lines.append(line)
    return lines


def _record(read: str, reference: str, position: int, cigar: str, clips: tuple,
            letters: str, hsp) -> str:
    flag = REVERSE_FLAG if hsp.minus else 0
    front, back = clips
    fields = [read, str(flag), reference, str(position), str(UNKNOWN_MAPPING_QUALITY),
              front + cigar + back, "*", "0", "0", letters, "*",
              f"AS:i:{hsp.score}", f"EV:f:{hsp.evalue:g}", f"NM:i:{hsp.gaps}",
              f"PI:f:{_percent_identity(hsp)}", f"BS:f:{hsp.bitscore:g}"]
    return "\t".join(fields)


def _percent_identity(hsp) -> str:
    aligned = hsp.length - hsp.gaps
    # blastn's SAM reads the count of its alignment, made on hard-masked letters if any
    identities = hsp.identities if hsp.masked_identities is None else hsp.masked_identities
    return _percent(identities, aligned)


def _percent(identities: int, aligned: int) -> str:
    percent = 100.0 if identities == aligned else min(99.99, 100.0 * identities / aligned)
    return f"{percent:.2f}"


def _query_reference_cigar(hsp) -> str:
    """Along the query: a column without a query letter inserts the subject's (I), one
    without a subject letter deletes from the query (D)."""
    return _cigar(_column_types(hsp.query_row, hsp.subject_row))


def _subject_reference_cigar(hsp) -> str:
    """Along the subject's plus strand: a minus-strand HSP's columns run backwards."""
    types = _column_types(hsp.subject_row, hsp.query_row)
    return _cigar(types[::-1] if hsp.minus else types)


def _column_types(reference_row: str, read_row: str) -> np.ndarray:
    reference = np.frombuffer(reference_row.encode("ascii"), dtype=np.uint8)
    read = np.frombuffer(read_row.encode("ascii"), dtype=np.uint8)
    gap = ord(GAP)
    return np.where(reference == gap, ord("I"), np.where(read == gap, ord("D"), ord("M")))


def _cigar(types: np.ndarray) -> str:
    """Run lengths of the column types: '3M1I5M'."""
    if not types.size:
        return ""
    starts = np.concatenate(([0], np.flatnonzero(types[1:] != types[:-1]) + 1))
    ends = np.concatenate((starts[1:], [types.size]))
    return "".join(f"{end - start}{chr(types[start])}"
                   for start, end in zip(starts.tolist(), ends.tolist()))


def _clips(first: int, end: int, length: int, reverse: bool) -> tuple:
    """The read's letters before and after the aligned [first, end) as hard clips, in the
    reference's direction: a read on the other strand has them swapped."""
    before, after = first, length - end
    if reverse:
        before, after = after, before
    return tuple(f"{count}H" if count > 0 else "" for count in (before, after))


def _subject_clips(hsp, db, ordinal: int) -> tuple:
    first = min(hsp.subject_start, hsp.subject_end) - 1
    end = max(hsp.subject_start, hsp.subject_end)
    return _clips(first, end, whole_length(db, ordinal), hsp.minus)


def _query_clips(hsp, query_length: int) -> tuple:
    return _clips(hsp.query_start - 1, hsp.query_end, query_length, hsp.minus)
