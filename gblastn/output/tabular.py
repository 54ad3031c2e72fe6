"""Tabular output: -outfmt 6 (tab-separated), 7 (the same with comment lines) and 10 (CSV).

Reproduces BLAST+ 2.12's CBlastTabularInfo line for line: the same columns, the same number
formatting (E-values, bit scores, percentages), coordinates shown on the query's plus strand
(a minus-strand hit reverses the subject instead), counts taken from the aligned letters.

HSP records arrive as gblastn.hsp stores them: context-relative query coordinates on the
context's strand, plus-strand subject coordinates, half-open ranges, an edit script of runs.
"""

import io
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TextIO

import numpy as np

from ..alphabet import COMPLEMENT_BLASTNA, IUPAC_FROM_BLASTNA, reverse_complement
from ..db.seqid import describe, ids_parsed
from ..db.subjects import letters_before, whole_length
from ..layouts import OP_DEL, OP_INS, OP_SUB
from ..numba_start import njit
from .linewriter import LineColumns
from .tabular_format import FIELD_TITLES, NAMES_PER_TAXID, NOT_AVAILABLE, PROGRAM_VERSION, \
    TAXONOMY_NAMES, TabularFormat

# --------------------------------------------------------------------------------------------
# Number formatting (CAlignFormatUtil::GetScoreString, CBlastTabularInfo::SetScores)

def format_evalue(evalue: float) -> str:
    if evalue < 1.0e-180:
        return "0.0"
    if evalue < 0.0009:
        return "%.2e" % evalue
    if evalue < 0.1:
        return "%4.3f" % evalue
    if evalue < 1.0:
        return "%3.2f" % evalue
    if evalue < 10.0:
        return "%2.1f" % evalue
    return "%2.0f" % evalue


def format_bitscore(bits: float) -> str:
    if bits > 99999:
        return "%5.3e" % bits
    if bits > 99.9:
        return "%3d" % int(bits)   # truncation toward zero, as the C cast to long
    return "%4.1f" % bits


def format_percent(numerator: int, length: int, digits: int) -> str:
    """pident (3 digits) and ppos (2 digits): (n / length) * 100 in that order."""
    value = (numerator / length) * 100 if length > 0 else 0.0
    return "%.*f" % (digits, value)


def coverage_percent(covered: int, query_length: int) -> int:
    """qcovs / qcovhsp / qcovus: 100 * covered / length, rounded half up below 99 and
    truncated from 99 on (so a near-complete cover is never shown as 100)."""
    pct = 100.0 * covered / query_length
    if pct < 99:
        pct += 0.5
    return int(pct)


# --------------------------------------------------------------------------------------------
# One HSP as displayed: query on its plus strand, subject reversed for minus-strand hits.

@dataclass
class DisplayedHsp:
    qstart: int          # 1-based, qstart <= qend
    qend: int
    sstart: int          # 1-based; sstart > send on the minus strand
    send: int
    minus: bool
    qseq: np.ndarray     # blastna codes of the shown rows, GAP_CODE for '-'
    sseq: np.ndarray
    gap_runs: int        # gap segments in either row


GAP_CODE = 15   # prints as '-'


def _alignment_rows(q_letters, s_letters, ops, op_len):
    """Expand an edit script into two aligned rows (GAP_CODE in a gap) and count gap runs."""
    total = int(np.sum(op_len))
    qrow = np.full(total, GAP_CODE, dtype=np.uint8)
    srow = np.full(total, GAP_CODE, dtype=np.uint8)
    col = qi = si = gap_runs = 0
    for op, n in zip(ops, op_len):
        n = int(n)
        if op == OP_SUB:
            qrow[col:col + n] = q_letters[qi:qi + n]
            srow[col:col + n] = s_letters[si:si + n]
            qi += n
            si += n
        elif op == OP_DEL:    # subject letters against a gap in the query
            srow[col:col + n] = s_letters[si:si + n]
            si += n
            gap_runs += 1
        elif op == OP_INS:    # query letters against a gap in the subject
            qrow[col:col + n] = q_letters[qi:qi + n]
            qi += n
            gap_runs += 1
        col += n
    return qrow, srow, gap_runs


def display_hsp(query_codes: np.ndarray, context: int, q_start: int, q_end: int,
                s_start: int, s_end: int, subject_letters: np.ndarray,
                ops: np.ndarray, op_len: np.ndarray) -> DisplayedHsp:
    """The alignment as BLAST prints it. `query_codes` is the query's plus strand,
    `subject_letters` the subject's plus-strand letters [s_start, s_end)."""
    length = int(query_codes.size)
    minus = context % 2 == 1
    qrow, srow, gap_runs = _alignment_rows(_strand_letters(query_codes, minus, q_start, q_end),
                                           subject_letters, ops, op_len)
    if minus:
        # reverse-complement the whole alignment: the query reads on its plus strand
        qrow, srow = COMPLEMENT_BLASTNA[qrow[::-1]], COMPLEMENT_BLASTNA[srow[::-1]]
        return DisplayedHsp(length - q_end + 1, length - q_start, s_end, s_start + 1, True,
                            qrow, srow, gap_runs)
    return DisplayedHsp(q_start + 1, q_end, s_start + 1, s_end, False, qrow, srow, gap_runs)


def _strand_letters(query_codes: np.ndarray, minus: bool, q_start: int, q_end: int):
    """Letters [q_start, q_end) of the context's strand, without reversing the whole query."""
    if not minus:
        return query_codes[q_start:q_end]
    length = int(query_codes.size)
    return reverse_complement(query_codes[length - q_end:length - q_start])


@njit(cache=True, nogil=True)
def alignment_counts(query_codes, minus, q_start, q_end, subject_letters, ops, op_len,
                     complement):
    """What the rows of display_hsp would give without building them: (columns, identical
    columns, gap letters in either row, gap runs). A column is identical when both rows hold
    the same letter that is not GAP_CODE; any GAP_CODE letter counts as a gap, as in the
    rows."""
    length = query_codes.size
    columns = nident = gaps = gap_runs = 0
    qi = si = 0
    for k in range(ops.size):
        op = ops[k]
        n = np.int64(op_len[k])
        columns += n
        if op == OP_SUB:
            for j in range(n):
                p = q_start + qi + j
                if minus:
                    a = complement[query_codes[length - 1 - p]]
                else:
                    a = query_codes[p]
                b = subject_letters[si + j]
                if a == GAP_CODE:
                    gaps += 1
                if b == GAP_CODE:
                    gaps += 1
                if a == b and a != GAP_CODE:
                    nident += 1
            qi += n
            si += n
        elif op == OP_DEL:
            gaps += n
            for j in range(n):
                if subject_letters[si + j] == GAP_CODE:
                    gaps += 1
            si += n
            gap_runs += 1
        elif op == OP_INS:
            gaps += n
            for j in range(n):
                p = q_start + qi + j
                a = complement[query_codes[length - 1 - p]] if minus else query_codes[p]
                if a == GAP_CODE:
                    gaps += 1
            qi += n
            gap_runs += 1
        else:
            gaps += 2 * n
    return columns, nident, gaps, gap_runs


# the columns of counts_of_all's rows (Hsps.counts): alignment_counts' values
COUNT_LENGTH = 0      # columns
COUNT_IDENTITIES = 1  # identical columns
COUNT_GAPS = 2        # gap letters in either row
COUNT_GAP_RUNS = 3
COUNT_FIELDS = 4


@njit(cache=True, nogil=True)
def counts_of_all(query_codes, context, q_start, q_end, s_start, subject, op_start, ops,
                   op_len, complement):
    """alignment_counts for each HSP of one subject: int64 [n, COUNT_FIELDS]. `subject` is
    the whole subject's letters."""
    n = context.size
    out = np.empty((n, COUNT_FIELDS), dtype=np.int64)
    for i in range(n):
        a, b = op_start[i], op_start[i + 1]
        s0 = s_start[i]
        out[i, COUNT_LENGTH], out[i, COUNT_IDENTITIES], out[i, COUNT_GAPS], \
            out[i, COUNT_GAP_RUNS] = alignment_counts(
            query_codes, context[i] % 2 == 1, q_start[i], q_end[i], subject[s0:],
            ops[a:b], op_len[a:b], complement)
    return out


def btop(qrow: np.ndarray, srow: np.ndarray) -> str:
    """Blast traceback operations: runs of identical letters as counts, other columns as
    the query letter followed by the subject letter ('-' for a gap)."""
    parts, run = [], 0
    qtext, stext = _letters(qrow), _letters(srow)
    for a, b in zip(qtext, stext):
        if a == b:
            run += 1
            continue
        if run:
            parts.append(str(run))
            run = 0
        parts.append(a + b)
    if run:
        parts.append(str(run))
    return "".join(parts)


def _letters(row: np.ndarray) -> str:
    return IUPAC_FROM_BLASTNA[row].tobytes().decode("ascii")


# --------------------------------------------------------------------------------------------
# Coverage across the HSPs of one subject

def _plus_strand_query_range(length: int, context: int, q_start: int, q_end: int):
    """Half-open query range on the plus strand."""
    if context % 2 == 1:
        return length - q_end, length - q_start
    return q_start, q_end


def _union_length(ranges) -> int:
    covered, current_start, current_end = 0, None, None
    for start, end in sorted(ranges):
        if current_end is None or start > current_end:
            if current_end is not None:
                covered += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        covered += current_end - current_start
    return covered


def query_coverage_per_subject(length: int, hsps, asked: int) -> int:
    """qcovs: the union of the query ranges of all the subject's HSPs (on a query of
    `length` letters), a share of `asked` letters."""
    ranges = [_plus_strand_query_range(length, int(hsps.context[i]), int(hsps.q_start[i]),
                                       int(hsps.q_end[i])) for i in range(len(hsps))]
    return coverage_percent(_union_length(ranges), asked)


def _subtract(range_, taken):
    """Parts of half-open `range_` not covered by the sorted, merged list `taken`."""
    start, end = range_
    pieces = []
    for a, b in taken:
        if b <= start or a >= end:
            continue
        if a > start:
            pieces.append((start, a))
        start = max(start, b)
        if start >= end:
            break
    if start < end:
        pieces.append((start, end))
    return pieces


def _merge(ranges):
    merged = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _column_positions(hsps, i):
    """Per alignment column of HSP i: query position (context strand) and subject position,
    -1 where that row has a gap."""
    first, last = int(hsps.op_start[i]), int(hsps.op_start[i + 1])
    q_cols, s_cols = [], []
    q, s = int(hsps.q_start[i]), int(hsps.s_start[i])
    for op, n in zip(hsps.ops[first:last], hsps.op_len[first:last]):
        n = int(n)
        q_cols.append(np.arange(q, q + n) if op != OP_DEL else np.full(n, -1))
        s_cols.append(np.arange(s, s + n) if op != OP_INS else np.full(n, -1))
        q += n if op != OP_DEL else 0
        s += n if op != OP_INS else 0
    return np.concatenate(q_cols), np.concatenate(s_cols)


def _query_range_under_subject(hsps, i, length, sub_start, sub_end):
    """Plus-strand query range facing subject letters [sub_start, sub_end) of HSP i.
    A subject end that faces a query gap takes the nearest query letter inside the stretch
    [UNCONFIRMED: BLAST's CAlnMap lookup would give no position there]."""
    q_cols, s_cols = _column_positions(hsps, i)
    first_col = int(np.flatnonzero(s_cols == sub_start)[0])
    last_col = int(np.flatnonzero(s_cols == sub_end - 1)[0])
    letters = q_cols[first_col:last_col + 1]
    letters = letters[letters >= 0]
    if letters.size == 0:
        return None
    q_from, q_to = int(letters.min()), int(letters.max())
    return _plus_strand_query_range(length, int(hsps.context[i]), q_from, q_to + 1)


def query_coverage_per_unique_subject(length: int, hsps, asked: int) -> int:
    """qcovus: like qcovs, but a subject stretch already covered by an earlier HSP (in
    output order) does not add its query range again (CAlignFormatUtil::GetUniqSeqCoverage)."""
    if len(hsps) == 0:
        return 0
    query_ranges = [_plus_strand_query_range(length, int(hsps.context[0]),
                                             int(hsps.q_start[0]), int(hsps.q_end[0]))]
    subject_taken = [(int(hsps.s_start[0]), int(hsps.s_end[0]))]
    for i in range(1, len(hsps)):
        s_range = (int(hsps.s_start[i]), int(hsps.s_end[i]))
        free = _subtract(s_range, subject_taken)
        if not free:
            continue
        if free[0] == s_range:
            query_ranges.append(_plus_strand_query_range(
                length, int(hsps.context[i]), int(hsps.q_start[i]), int(hsps.q_end[i])))
        else:
            for a, b in free:
                mapped = _query_range_under_subject(hsps, i, length, a, b)
                if mapped is not None:
                    query_ranges.append(mapped)
        subject_taken = _merge(subject_taken + free)
    return coverage_percent(_union_length(query_ranges), asked)


# --------------------------------------------------------------------------------------------
# Subject identifiers from the database

def _gi_of(seq_id: str, parsed: bool) -> str:
    if parsed:
        found = re.search(r"(?:^|\|)gi\|(\d+)", seq_id)
        if found:
            return found.group(1)
    return "0"


def _accession_base_of(seq_id: str, accession: str, parsed: bool) -> str:
    """sacc: the accession without its version, for ids the database parsed."""
    if parsed and "|" in seq_id:
        found = re.fullmatch(r"(.+)\.\d+", accession)
        if found:
            return found.group(1)
    return accession


def _subject_gi(db, ordinal: int) -> str:
    return _gi_of(db.seq_id(ordinal), ids_parsed(db, ordinal))


def _subject_accession_base(db, ordinal: int) -> str:
    return _accession_base_of(db.seq_id(ordinal), db.accession(ordinal),
                              ids_parsed(db, ordinal))


def subject_deflines(db, ordinal: int) -> list[tuple[str, str, str]]:
    """(seq_id, accession, title) of each of the subject's deflines, in the database's
    order (makeblastdb -parse_seqids stores several for a title with ^A in it)."""
    texts = db.defline_texts(ordinal)
    if len(texts) == 1:
        return [(db.seq_id(ordinal), db.accession(ordinal), db.title_of(ordinal))]
    parsed = ids_parsed(db, ordinal)
    return [describe(text, parsed) for text in texts]


def _all_deflines_value(name: str, db, ordinal: int) -> str:
    """sallseqid, sallgi, sallacc (';' between deflines), salltitles ('<>' between them,
    N/A for a defline without a title)."""
    parsed = ids_parsed(db, ordinal)
    found = subject_deflines(db, ordinal)
    if name == "sallseqid":
        return ";".join(seq_id for seq_id, _, _ in found)
    if name == "sallgi":
        return ";".join(_gi_of(seq_id, parsed) for seq_id, _, _ in found)
    if name == "sallacc":
        return ";".join(_accession_base_of(seq_id, accession, parsed)
                        for seq_id, accession, _ in found)
    return "<>".join(title or NOT_AVAILABLE for _, _, title in found)


def report_accession(db, ordinal: int) -> str:
    """The accession the XML and JSON reports give: sacc's, but of a general id (gnl|db|tag,
    sacc db:tag) the tag alone."""
    return report_accession_of(db.seq_id(ordinal), db.accession(ordinal),
                               ids_parsed(db, ordinal))


def report_accession_of(seq_id: str, accession: str, parsed: bool) -> str:
    """report_accession of one defline's ids."""
    accession = _accession_base_of(seq_id, accession, parsed)
    general = re.search(r"(?:^|\|)gnl\|([^|]*)\|([^|]*)", seq_id)
    if general and accession == f"{general.group(1)}:{general.group(2)}":
        return general.group(2)
    return accession


def _taxonomy_value(name: str, db, ordinal: int, columns: tuple) -> str:
    """staxid: the first taxid that is set; staxids: every taxid, once, in increasing order;
    the names N/A: one per taxid for NAMES_PER_TAXID beside a staxids column (blastn lists
    a subject's taxids for the names only where that column asks for them), else one. A
    -subject sequence has no taxid."""
    taxids = db.taxids_of(ordinal)
    if name == "staxid":
        first = next((taxid for taxid in taxids if taxid), 0)
        return str(first) if first else NOT_AVAILABLE
    distinct = sorted(set(taxids))
    if name == "staxids":
        return ";".join(map(str, distinct)) or NOT_AVAILABLE
    if name in NAMES_PER_TAXID and "staxids" in columns:
        return ";".join(NOT_AVAILABLE for _ in distinct) or NOT_AVAILABLE
    return NOT_AVAILABLE


def _subject_title(db, ordinal: int) -> str:
    title = db.title_of(ordinal)
    return title if title else NOT_AVAILABLE


# --------------------------------------------------------------------------------------------
# Writing

def _query_header_text(query) -> str:
    """'# Query:' text: the defline as blastn keeps it (query.blast_defline), empty for a
    query without one (whose id is Query_N)."""
    from ..query import blast_defline
    return blast_defline(getattr(query, "defline", "") or "")


def write_header(out: TextIO, fmt: TabularFormat, query, db_name: str, num_hits: int) -> None:
    """outfmt 7 comment lines before a query's hits (nothing for 6 and 10)."""
    if not fmt.with_comments:
        return
    out.write(f"# {PROGRAM_VERSION}\n")
    out.write(f"# Query: {_query_header_text(query)}\n")
    out.write(f"# Database: {db_name}\n")
    if num_hits:
        out.write("# Fields: " + ", ".join(FIELD_TITLES[c] for c in fmt.columns) + "\n")
    if not getattr(query, "batch_unsearched", False):  # blastn has no hit list to count
        out.write(f"# {num_hits} hits found\n")


_NEEDS_ALIGNMENT = {"qstart", "qend", "sstart", "send", "qseq", "sseq", "length", "pident",
                    "nident", "mismatch", "positive", "gapopen", "gaps", "ppos", "btop",
                    "sstrand", "frames", "sframe"}


_NEEDS_ROWS = {"qseq", "sseq", "btop"}
# the columns for which blastn's formatter reads the letters and counts the identities on
# them, rather than taking its alignment's count (they differ under -db_hard_mask)
_READS_LETTERS = _NEEDS_ROWS | {"positive", "ppos"}


def _stored_counts(hsps, columns: tuple):
    """The HSPs' counts as the columns show them: the traceback's, or None where the
    true letters are to be counted."""
    if hsps.masked_identities is not None and _READS_LETTERS.intersection(columns):
        return None
    return hsps.counts


@lru_cache(maxsize=64)
def _column_needs(columns: tuple) -> tuple:
    """(any column needs the alignment, any column needs the aligned rows)."""
    return bool(_NEEDS_ALIGNMENT.intersection(columns)), bool(_NEEDS_ROWS.intersection(columns))


def _hsp_fields(fmt, query, db, ordinal, hsps, i, per_subject) -> list:
    columns = fmt.columns
    values = {}
    needs_alignment, needs_rows = _column_needs(columns)
    if needs_alignment:
        start, end = int(hsps.op_start[i]), int(hsps.op_start[i + 1])
        context, q_start, q_end = int(hsps.context[i]), int(hsps.q_start[i]), int(hsps.q_end[i])
        s_start, s_end = int(hsps.s_start[i]), int(hsps.s_end[i])
        ops, op_len = hsps.ops[start:end], hsps.op_len[start:end]
        minus = context % 2 == 1
        qlen = int(query.codes.size)
        subject = None
        counts = _stored_counts(hsps, columns)
        if needs_rows or counts is None:
            subject = db.blastna(ordinal, s_start, s_end)
        if needs_rows:
            shown = display_hsp(query.codes, context, q_start, q_end, s_start, s_end, subject,
                                ops, op_len)
            values.update(qseq=_letters(shown.qseq), sseq=_letters(shown.sseq))
            if "btop" in columns:
                values["btop"] = btop(shown.qseq, shown.sseq)
        if counts is not None:
            length, nident, gaps, gap_runs = (int(x) for x in counts[i])
        else:
            length, nident, gaps, gap_runs = alignment_counts(
                query.codes, minus, q_start, q_end, subject, ops, op_len, COMPLEMENT_BLASTNA)
        if minus:
            qstart, qend, sstart, send = qlen - q_end + 1, qlen - q_start, s_end, s_start + 1
        else:
            qstart, qend, sstart, send = q_start + 1, q_end, s_start + 1, s_end
        before = int(letters_before(db, ordinal))
        sstart, send = sstart + before, send + before
        values.update(
            qstart=qstart, qend=qend, sstart=sstart, send=send, length=length,
            nident=nident, positive=nident, gaps=gaps, gapopen=gap_runs,
            mismatch=length - nident - gaps,
            sstrand="minus" if minus else "plus",
            sframe=-1 if minus else 1, frames="1/-1" if minus else "1/1")
        if "pident" in columns:
            values["pident"] = format_percent(nident, length, 3)
        if "ppos" in columns:
            values["ppos"] = format_percent(nident, length, 2)
    for name in columns:
        if name in values:
            continue
        if name in _PER_HSP:
            values[name] = _PER_HSP[name](_slice(hsps, i), query.searched_length)[0]
        else:
            values[name] = _per_subject_value(name, query, db, ordinal, per_subject, columns)
    return [str(values[name]) for name in columns]


# the columns that differ between the HSPs of a subject, beside the alignment's: each gives
# the texts of all HSPs of an object with the fields' arrays
_PER_HSP = {
    "evalue": lambda hsps, qlen: [format_evalue(e) for e in hsps.evalue.tolist()],
    "bitscore": lambda hsps, qlen: [format_bitscore(b) for b in hsps.bitscore.tolist()],
    "score": lambda hsps, qlen: [str(v) for v in hsps.score.tolist()],
    "qcovhsp": lambda hsps, qlen: [str(coverage_percent(end - start, qlen)) for start, end
                                   in zip(hsps.q_start.tolist(), hsps.q_end.tolist())],
}


def _per_subject_value(name: str, query, db, ordinal: int, per_subject: dict, columns: tuple):
    """A column whose value is the same for every HSP of the subject (of those `columns`)."""
    if name in ("qseqid", "qacc", "qaccver"):
        return query.id
    if name == "qgi":
        return "0"
    if name == "qlen":
        return query.asked_length
    if name == "sseqid":
        return db.seq_id(ordinal)
    if name == "sgi":
        return _subject_gi(db, ordinal)
    if name == "sacc":
        return _subject_accession_base(db, ordinal)
    if name == "saccver":
        return db.accession(ordinal)
    if name == "stitle":
        return _subject_title(db, ordinal)
    if name in ("sallseqid", "sallgi", "sallacc", "salltitles"):
        return _all_deflines_value(name, db, ordinal)
    if name == "slen":
        return whole_length(db, ordinal)
    if name == "qframe":
        return 1
    if name in TAXONOMY_NAMES or name in ("staxid", "staxids"):
        return _taxonomy_value(name, db, ordinal, columns)
    return per_subject[name]  # qcovs, qcovus


def _lines_of(fmt, db, entries: list) -> list:
    """The output lines of each entry's HSPs, an entry being (query, subjects), subjects and
    HSPs in the given order, each line ended by a newline: one text per entry. The lines of
    all entries are formatted together, a column at a time, and written by one compiled
    call (linewriter): Python's share is the same for one query as for a batch. The aligned
    rows (qseq, sseq, btop) and HSPs without stored counts take _hsp_fields, HSP by HSP."""
    columns = fmt.columns
    covered = "qcovs" in columns or "qcovus" in columns
    per_subject = [[_coverages(fmt, query, subject.hsps) for subject in subjects] if covered
                   else [{}] * len(subjects) for query, subjects in entries]
    needs_alignment, needs_rows = _column_needs(columns)
    if needs_rows or (needs_alignment and any(_stored_counts(subject.hsps, columns) is None
                                              for _, subjects in entries
                                              for subject in subjects)):
        return ["".join(fmt.delimiter.join(_hsp_fields(fmt, query, db, subject.ordinal,
                                                       subject.hsps, i, extra)) + "\n"
                        for subject, extra in zip(subjects, extras)
                        for i in range(len(subject.hsps)))
                for (query, subjects), extras in zip(entries, per_subject)]
    subjects = [subject for _, entry_subjects in entries for subject in entry_subjects]
    sizes = [len(subject.hsps) for subject in subjects]
    # each entry's rows: the HSPs of its subjects, which follow one another in `sizes`
    counts = np.array([len(entry_subjects) for _, entry_subjects in entries], dtype=np.int64)
    bounds = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
    ends = np.cumsum(counts)
    rows_of_entry = (bounds[ends] - bounds[ends - counts]).tolist()
    if not subjects:
        return ["" for _ in entries]
    hsps = _concatenated([subject.hsps for subject in subjects], needs_alignment)
    qlen = np.repeat(np.array([len(query) for query, _ in entries], dtype=np.int64),
                     rows_of_entry)
    searched = np.repeat(np.array([query.searched_length for query, _ in entries],
                                  dtype=np.int64), rows_of_entry)
    lines = LineColumns(int(sum(sizes)), len(columns))
    before = np.repeat(letters_before(db, np.array([subject.ordinal for subject in subjects],
                                                   dtype=np.int64)), sizes)
    numbers = _alignment_numbers(hsps, qlen, before) if needs_alignment else {}
    minus = hsps.context % 2 == 1
    for name in columns:
        if name in numbers:
            lines.add_int(numbers[name]())
        elif name in ("pident", "ppos"):
            length, nident = hsps.counts[:, COUNT_LENGTH], hsps.counts[:, COUNT_IDENTITIES]
            percent = np.where(length > 0, (nident / np.maximum(length, 1)) * 100, 0.0)
            lines.add_fixed(percent, 3 if name == "pident" else 2)
        elif name in _STRAND_TEXT:
            lines.add_text(list(_STRAND_TEXT[name]), minus.astype(np.int64))
        elif name == "evalue":
            lines.add_formatted(hsps.evalue, format_evalue)
        elif name == "bitscore":
            lines.add_bitscore(hsps.bitscore, format_bitscore)
        elif name == "score":
            lines.add_int(hsps.score)
        elif name == "qcovhsp":
            lines.add_int(_coverage_percents(hsps.q_end - hsps.q_start, searched))
        else:
            lines.add_repeated_text(
                [str(_per_subject_value(name, query, db, subject.ordinal, extra, columns))
                 for (query, entry_subjects), extras in zip(entries, per_subject)
                 for subject, extra in zip(entry_subjects, extras)], sizes)
    return lines.write_parts(fmt.delimiter, rows_of_entry)


def _coverage_percents(covered, query_length: int):
    """coverage_percent of each value of an array."""
    percent = 100.0 * np.asarray(covered, dtype=np.int64) / query_length
    return np.where(percent < 99, percent + 0.5, percent).astype(np.int64)


def _coverages(fmt, query, hsps) -> dict:
    """The per-subject query coverages the columns ask for, shares of the letters the
    search asked for (blastn's, with -query_loc)."""
    extra = {}
    if "qcovs" in fmt.columns:
        extra["qcovs"] = query_coverage_per_subject(len(query), hsps, query.asked_length)
    if "qcovus" in fmt.columns:
        extra["qcovus"] = query_coverage_per_unique_subject(len(query), hsps,
                                                            query.asked_length)
    return extra


def _slice(hsps, i: int):
    """HSP i's fields that _PER_HSP reads, as one-element arrays."""
    from types import SimpleNamespace

    return SimpleNamespace(**{name: getattr(hsps, name)[i:i + 1]
                              for name in ("evalue", "bitscore", "score", "q_start", "q_end")})


def _concatenated(parts: list, with_counts: bool):
    """The fields the columns read, of several subjects' HSPs, end to end."""
    from types import SimpleNamespace

    from ..hsp import joined

    names = ("context", "q_start", "q_end", "s_start", "s_end", "score", "evalue", "bitscore",
             *(("counts",) if with_counts else ()))
    out = SimpleNamespace(**dict(zip(names, joined(parts, names))))
    out.counts = out.counts if with_counts else None
    return out


def _alignment_numbers(hsps, qlen: int, subject_before: np.ndarray) -> dict:
    """The integer columns that come from the alignments: name -> a function giving them.
    `subject_before`: each HSP's subject letters before the part searched (-subject_loc)."""
    minus = hsps.context % 2 == 1
    q_start, q_end = hsps.q_start.astype(np.int64), hsps.q_end.astype(np.int64)
    s_start = hsps.s_start.astype(np.int64) + subject_before
    s_end = hsps.s_end.astype(np.int64) + subject_before
    length, nident, gaps, gap_runs = (hsps.counts[:, k] for k in (
        COUNT_LENGTH, COUNT_IDENTITIES, COUNT_GAPS, COUNT_GAP_RUNS))
    return {
        "qstart": lambda: np.where(minus, qlen - q_end + 1, q_start + 1),
        "qend": lambda: np.where(minus, qlen - q_start, q_end),
        "sstart": lambda: np.where(minus, s_end, s_start + 1),
        "send": lambda: np.where(minus, s_start + 1, s_end),
        "length": lambda: length, "nident": lambda: nident, "positive": lambda: nident,
        "gaps": lambda: gaps, "gapopen": lambda: gap_runs,
        "mismatch": lambda: length - nident - gaps,
    }


_STRAND_TEXT = {"sstrand": ("plus", "minus"), "sframe": ("1", "-1"), "frames": ("1/1", "1/-1")}


def write_query(out: TextIO, fmt: TabularFormat, query, result, db, *, db_name: str) -> None:
    """All output lines of one query: the outfmt 7 header (when asked for), then one line
    per HSP, subjects and HSPs in the order `result` holds them."""
    out.write(format_queries(fmt, [(query, result)], db, db_name=db_name)[0])


def format_queries(fmt: TabularFormat, pairs: list, db, *, db_name: str) -> list:
    """write_query's text of each (query, result) pair, all formatted together."""
    entries = [(query, [subject for subject in result.subjects if len(subject.hsps)])
               for query, result in pairs]
    texts = []
    for (query, result), lines in zip(pairs, _lines_of(fmt, db, entries)):
        if fmt.with_comments:
            header = io.StringIO()
            write_header(header, fmt, query, db_name,
                         sum(len(subject.hsps) for subject in result.subjects))
            lines = header.getvalue() + lines
        texts.append(lines)
    return texts


# --------------------------------------------------------------------------------------------
# Records for the Python API

_INT_COLUMNS = {"qlen", "slen", "qstart", "qend", "sstart", "send", "length", "mismatch",
                "gapopen", "gaps", "nident", "positive", "score", "qcovs", "qcovhsp", "qcovus",
                "qframe", "sframe"}
_FLOAT_COLUMNS = {"pident", "ppos"}


def hit_records(query, result, db, columns: str = "std score sstrand qlen slen") -> list:
    """One dict per HSP of `result`, keyed by tabular column name, with the values the tabular
    output prints (coordinates and counts as int, percentages as float, evalue and bitscore
    as the unrounded float), in output order."""
    fmt = TabularFormat.parse("6 " + columns)
    records = []
    for subject in result.subjects:
        hsps = subject.hsps
        per_subject = _coverages(fmt, query, hsps)
        for i in range(len(hsps)):
            fields = _hsp_fields(fmt, query, db, subject.ordinal, hsps, i, per_subject)
            record = {}
            for name, text in zip(fmt.columns, fields):
                if name == "evalue":
                    record[name] = float(hsps.evalue[i])
                elif name == "bitscore":
                    record[name] = float(hsps.bitscore[i])
                elif name in _INT_COLUMNS:
                    record[name] = int(text)
                elif name in _FLOAT_COLUMNS:
                    record[name] = float(text)
                else:
                    record[name] = text
            records.append(record)
    return records
