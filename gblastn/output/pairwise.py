"""Pairwise text: -outfmt 0, byte for byte as blastn 2.12 writes it (CBlastFormat's prolog,
per-query report and epilog; CShowBlastDefline's one-line descriptions; CDisplaySeqalign's
alignments; CAlignFormatUtil's number formats and line wrapping).

The report of one query: its title and length, one line per subject (-num_descriptions of
them) with the best HSP's bit score and E-value, the alignments of the first
-num_alignments subjects, -line_length letters a row, masked query letters in lower case,
and the query's Karlin-Altschul parameters and search space. The database and the scoring
system close the file.
"""

from dataclasses import dataclass

import numpy as np

from ..db.seqid import describe, ids_parsed, primary_defline
from ..db.subjects import is_subject_set, shown_num_seqs, whole_length
from .alignments import lower_masked, mask_of, shown_hsps
from .statistics import query_statistics
from .tabular import format_bitscore, subject_deflines

PROGRAM_VERSION = "BLASTN 2.12.0+"
LINE_WIDTH = 68            # kFormatLineLength: headers, references and descriptions
TITLE_WRAP = 60            # the subject titles above the alignments
MEGABLAST_REFERENCE = ('Zheng Zhang, Scott Schwartz, Lukas Wagner, and Webb Miller (2000), '
                       '"A greedy algorithm for aligning DNA sequences", '
                       'J Comput Biol 2000; 7(1-2):203-14.')
GAPPED_BLAST_REFERENCE = ('Stephen F. Altschul, Thomas L. Madden, Alejandro A. Schaffer, '
                          'Jinghui Zhang, Zheng Zhang, Webb Miller, and David J. Lipman (1997), '
                          '"Gapped BLAST and PSI-BLAST: a new generation of protein database '
                          'search programs", Nucleic Acids Res. 25:3389-3402.')
ROW_NAMES = ("Query", "Sbjct")
MARGIN = 2                 # between a row's name, start, letters and end


# --------------------------------------------------------------------------------------------
# Text helpers (NStr::Wrap, GetScoreString, GetPercentMatch)

_FORCED, _PUNCT, _COMMA, _SPACE, _NEWLINE = range(5)


def wrap(text: str, width: int) -> list:
    """NStr::Wrap with fWrap_FlatFile: lines of at most `width` characters, broken at the
    last space (dropped, with the spaces after it), else after the last comma or hyphen,
    else anywhere."""
    lines, pos, n = [], 0, len(text)
    while pos < n:
        newline = text.find("\n", pos)
        newline = n if newline < 0 else newline
        first = newline if newline - pos <= width else pos
        best_pos, best_score, column, at = None, _FORCED, 0, first
        while at < n and column <= width:
            char, score, score_pos = text[at], _FORCED, at
            if char == "\n":
                best_pos, best_score = at, _NEWLINE
                break
            if char.isspace():
                score = _SPACE
            elif char == "," and column < width and at < n - 1:
                score, score_pos = _COMMA, at + 1
            elif char == "-" and at < n - 1 and column < width:
                score, score_pos = _PUNCT, at + 1
            if score >= best_score and score_pos > first:
                best_pos, best_score = score_pos, score
            at += 1
            column += 1
        if best_score != _NEWLINE and column <= width:
            best_pos = n
        lines.append(text[pos:best_pos])
        pos = best_pos
        if best_score == _SPACE:
            while pos < n and text[pos] == " ":
                pos += 1
            if pos < n and text[pos] == "\n":
                pos += 1
        elif best_score == _NEWLINE:
            pos += 1
    return lines


def wrapped(text: str, width: int = LINE_WIDTH) -> str:
    return "".join(line + "\n" for line in wrap(text, width))


def wrap_title(title: str) -> str:
    """s_WrapOutputLine: a title longer than 60 characters breaks at the first space after
    each multiple of 60 (the space stays at the end of the line)."""
    if len(title) <= TITLE_WRAP:
        return title
    out, pending = [], False
    for i, char in enumerate(title):
        if i > 0 and i % TITLE_WRAP == 0:
            pending = True
        out.append(char)
        if pending and char.isspace():
            out.append("\n")
            pending = False
    return "".join(out)


def evalue_text(evalue: float) -> str:
    """GetScoreString's E-value (the descriptions' and the alignments')."""
    if evalue < 1.0e-180:
        return "0.0"
    if evalue < 1.0e-99:
        return "%2.0e" % evalue
    if evalue < 0.0009:
        return "%3.0e" % evalue
    if evalue < 0.1:
        return "%4.3f" % evalue
    if evalue < 1.0:
        return "%3.2f" % evalue
    if evalue < 10.0:
        return "%2.1f" % evalue
    return "%2.0f" % evalue


def percent(numerator: int, denominator: int) -> int:
    """GetPercentMatch: rounded, and 100 only when equal."""
    if numerator == denominator:
        return 100
    return min(99, int(0.5 + 100.0 * numerator / denominator))


def with_commas(number: int) -> str:
    return f"{number:,}"


def posted_date(created: str) -> str:
    """makeblastdb's date: the hour without its leading zero ('Nov 26, 2026  3:43 PM')."""
    day, sep, time = created.partition("  ")
    return day + sep + (time[1:] if time.startswith("0") else time)


# --------------------------------------------------------------------------------------------
# Subjects' names

def subject_id(db, ordinal: int, show_gis: bool) -> tuple:
    """(gi, the id as the descriptions show it, the id as the alignments' titles show it):
    none for a database without parsed ids, whose sequences are known by ordinal."""
    if not ids_parsed(db, ordinal):
        return 0, "", ""
    return _id_forms(db.seq_id(ordinal), db.accession(ordinal), show_gis)


def _id_forms(seq_id: str, accession: str, show_gis: bool) -> tuple:
    """subject_id's forms of one defline's ids: a GI alone shows as gi|N, a local id bare."""
    from .tabular import _gi_of

    gi = int(_gi_of(seq_id, True))
    fasta = _best_fasta_id(seq_id)
    if fasta.startswith("lcl|"):
        return gi, fasta[4:] + " ", fasta[4:]
    # a GI alone, or a name without an accession (pir||NAME), shows in its FASTA form
    name_only = fasta.count("|") >= 2 and not fasta.split("|")[1]
    bare = fasta if fasta.startswith("gi|") or name_only else accession
    long_form = show_gis and gi > 0
    return gi, (fasta if show_gis and not fasta.startswith("gi|") else bare + " "), \
        (fasta if long_form else bare)


def _best_fasta_id(seq_id: str) -> str:
    """The id a FASTA id list shows first: the one after a leading gi (gi|N|gb|X.1| gives
    gb|X.1|), or the whole id; a bare id is local (lcl|)."""
    parts = seq_id.split("|")
    if len(parts) == 1:
        return "lcl|" + seq_id
    if parts[0] == "gi" and len(parts) > 2:
        return "|".join(parts[2:])
    return seq_id


def subject_title(db, ordinal: int) -> str:
    """The title the description shows: the primary defline's (the one sseqid names)."""
    if is_subject_set(db):  # blastn reads a defline that is not UTF-8 as Latin-1
        from ..query import latin1_if_not_utf8

        return latin1_if_not_utf8(db.shown_defline(ordinal))
    if not ids_parsed(db, ordinal):
        return db.defline(ordinal)
    texts = db.defline_texts(ordinal)
    if len(texts) == 1:
        return db.title_of(ordinal)
    return describe(primary_defline(texts, True), True)[2]


# third-party annotation ids, whose titles blastn's descriptions mark
THIRD_PARTY_KINDS = ("tpg", "tpe", "tpd")
THIRD_PARTY_MARK = "TPA: "


def _described_title(db, ordinal: int) -> str:
    """subject_title as a description line shows it: a third-party annotation's marked
    'TPA: ' (once), as blastn's defline generator marks it."""
    title = subject_title(db, ordinal)
    if ids_parsed(db, ordinal) and not is_subject_set(db) and \
            _best_fasta_id(db.seq_id(ordinal)).split("|")[0] in THIRD_PARTY_KINDS and \
            not title.startswith(THIRD_PARTY_MARK.rstrip()):
        return THIRD_PARTY_MARK + title
    return title


def _title_lines(db, ordinal: int, show_gis: bool) -> str:
    """The alignments' title: '>' and each defline of the subject in turn, the later ones
    on lines of their own starting with a blank; a -subject's defline after '> '."""
    if is_subject_set(db):
        return "> " + wrap_title(subject_title(db, ordinal)) + "\n"
    if not ids_parsed(db, ordinal):
        return ">" + wrap_title(db.defline(ordinal)) + "\n"
    lines = []
    for seq_id, accession, title in subject_deflines(db, ordinal):
        gi, _, title_id = _id_forms(seq_id, accession, show_gis)
        head = f"gi|{gi}|" if show_gis and gi > 0 and not title_id.startswith("gi|") else ""
        lines.append(f"{head}{title_id} {wrap_title(title)}\n")
    return ">" + " ".join(lines)


def database_title(db) -> str:
    """The database the header and the footer name; for -subject blastn's words."""
    return f"{db.name}." if is_subject_set(db) else db.title


def database_date(db) -> str:
    """The footer's date: the database's build (blastn knows none of -subject's)."""
    return "Unknown" if is_subject_set(db) else posted_date(db.created)


# --------------------------------------------------------------------------------------------
# The report

@dataclass
class PairwiseReport:
    """-outfmt 0, made by output.formats with blastn's defaults for the settings not given."""

    options: object
    db_name: str
    line_length: int
    num_descriptions: int
    num_alignments: int
    show_gis: bool

    def render(self, pairs: list, db) -> list:
        statistics = query_statistics([query for query, _ in pairs], db, self.options)
        texts = []
        for (query, result), stats in zip(pairs, statistics):
            text = self._query(query, result, stats, db)
            if result.query_index == 0:
                text = self._prolog(db) + text
            texts.append(text)
        return texts

    def footer(self, db, count: int) -> str:
        if not count:
            return ""
        options = self.options
        extension = float(options.gapextend)
        if options.gapextend == 0:  # linear gap costs (PMID 10890397)
            extension = (-2 * options.penalty + options.reward) / 2.0
        return "".join([
            "\n", *("".join([
                "\n  Database: ", wrapped(title), _masked_using(db, "  "),
                f"    Posted date:  {date}\n",
                f"  Number of letters in database: {with_commas(letters)}\n",
                f"  Number of sequences in database:  {with_commas(num_seqs)}\n"])
                for title, date, letters, num_seqs in _footer_databases(db)), "\n",
            f"\n\nMatrix: blastn matrix {options.reward} {options.penalty}\n",
            "" if options.ungapped else
            f"Gap Penalties: Existence: {options.gapopen}, Extension: {extension:g}\n",
            # the two-hit window of discontiguous words, as blastn names it
            f"Window for multiple hits: {options.window_size}\n" if options.window_size else ""])

    def _prolog(self, db) -> str:
        reference = MEGABLAST_REFERENCE if self.options.task == "megablast" \
            else GAPPED_BLAST_REFERENCE
        return "".join([
            f"{PROGRAM_VERSION}\n\n\n", wrapped("Reference: " + reference), "\n\n\n",
            "Database: ", wrapped(database_title(db)), _masked_using(db, ""),
            f"{' ' * 11}{with_commas(shown_num_seqs(db))} sequences; "
            f"{with_commas(db.total_letters)} total letters\n\n"])

    def _query(self, query, result, stats, db) -> str:
        from ..query import blast_defline

        parts = ["\n\nQuery= ", wrapped(blast_defline(query.defline or "")),
                 f"\nLength={len(query)}\n"]
        subjects = [subject for subject in result.subjects if len(subject.hsps)]
        if not subjects:
            parts.append("\n\n***** No hits found *****\n\n\n")
        else:
            shown = [(subject, shown_hsps(query, db, subject))
                     for subject in subjects[:max(self.num_descriptions, self.num_alignments)]]
            parts.append(self._descriptions(shown[:self.num_descriptions], db))
            parts.append("\n")
            masked = mask_of(len(query), stats.masked)
            for subject, hsps in shown[:self.num_alignments]:
                parts.append(self._alignments(subject, hsps, db, masked))
        parts.append(_karlin_footer(stats))
        return "".join(parts)

    def _descriptions(self, shown: list, db) -> str:
        if not shown:
            return "\n"
        scores = [(format_bitscore(hsps[0].bitscore), evalue_text(hsps[0].evalue))
                  for _, hsps in shown]
        score_width = max([len("(Bits)")] + [len(bits) for bits, _ in scores])
        evalue_width = max([len("Value")] + [len(evalue) for _, evalue in scores])
        lines = [" " * (LINE_WIDTH + 2) + "Score" + " " * (score_width - 5 + 2) + "  E\n",
                 "Sequences producing significant alignments:"
                 + " " * (LINE_WIDTH - 43 + 1) + "(Bits)" + " " * (score_width - 6 + 2)
                 + "Value\n\n"]
        for (subject, _), (bits, evalue) in zip(shown, scores):
            lines.append(self._description(subject.ordinal, db) + "  " + bits.ljust(score_width)
                         + "  " + evalue.ljust(evalue_width) + "\n")
        return "".join(lines) + "\n"

    def _description(self, ordinal: int, db) -> str:
        """The subject's id and title, cut to LINE_WIDTH with '...', padded to it; in bytes,
        as blastn counts a title that is not ASCII (a -subject's)."""
        gi, shown_id, _ = subject_id(db, ordinal, self.show_gis)
        head = f"gi|{gi}|" if self.show_gis and gi > 0 else ""
        component = _bytes(("  " if head else "") + _described_title(db, ordinal))
        head = _bytes(head + shown_id)
        room = LINE_WIDTH - len(head)
        if len(component) > room:
            component = component[:room - 3] + b"..." if room >= 3 else component
        return (head + component).ljust(LINE_WIDTH).decode("utf-8", "surrogateescape")

    def _alignments(self, subject, hsps: list, db, masked: np.ndarray) -> str:
        parts = [_title_lines(db, subject.ordinal, self.show_gis),
                 f"Length={whole_length(db, subject.ordinal)}\n\n"]
        subject_masks = db.masked_ranges(subject.ordinal) \
            if getattr(db, "mask_algorithm", None) is not None else None
        for hsp in hsps:
            parts.append(self._hsp(hsp, masked, subject_masks))
        return "".join(parts)

    def _hsp(self, hsp, masked: np.ndarray, subject_masks) -> str:
        length, matches, gaps = hsp.length, hsp.identities, hsp.gaps
        parts = [f" Score = {format_bitscore(hsp.bitscore)} bits ({hsp.score}),  "
                 f"Expect = {evalue_text(hsp.evalue)}\n",
                 f" Identities = {matches}/{length} ({percent(matches, length)}%), "
                 f"Gaps = {gaps}/{length} ({percent(gaps, length)}%)\n",
                 f" Strand=Plus/{'Minus' if hsp.minus else 'Plus'}\n\n"]
        parts += _rows(hsp, masked, self.line_length, subject_masks)
        return "".join(parts) + "\n"


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _footer_databases(db) -> list:
    """(title, posted date, letters, sequences) of the database the footer names, or of
    each of several (a -db value of several names, which blastn's footer lists apart)."""
    parts = getattr(db, "footer_parts", None)
    if parts:
        return [(title, posted_date(created), letters, num_seqs)
                for title, created, letters, num_seqs in parts]
    return [(database_title(db), database_date(db), db.total_letters, shown_num_seqs(db))]


def _masked_using(db, indent: str) -> str:
    """The line naming the database's masking algorithm under -db_soft_mask or
    -db_hard_mask."""
    algorithm = getattr(db, "mask_algorithm", None)
    named = None if algorithm is None else algorithm.description()
    return "" if named is None else f"{indent}Masked using: {named}\n"


def _karlin_footer(stats) -> str:
    parts = ["\n"]
    if stats.ungapped is not None:
        parts.append(_karlin_block(stats.ungapped))
    parts.append("\n")
    if stats.gapped is not None:
        parts.append("Gapped\n" + _karlin_block(stats.gapped))
    parts.append(f"\nEffective search space used: {stats.search_space}\n")
    return "".join(parts)


def _karlin_block(block) -> str:
    return ("Lambda      K        H\n"
            + "".join("%#8.3g " % value for value in (block.lambda_, block.k, block.h)) + "\n")


def _rows(hsp, masked: np.ndarray, line_length: int, subject_masks=None) -> list:
    """The alignment's rows, `line_length` columns at a time: the query (masked letters in
    lower case), the middle line, the subject (the letters of its masked ranges [start,
    end) in lower case, under -db_soft_mask or -db_hard_mask), each with its first and last
    position."""
    query_row = lower_masked(hsp.query_row, hsp.query_start, masked)
    middle = hsp.midline()
    query_positions = _positions(hsp.query_row, hsp.query_start, 1)
    subject_positions = _positions(hsp.subject_row, hsp.subject_start,
                                   -1 if hsp.minus else 1)
    subject_row = hsp.subject_row if subject_masks is None else \
        _lower_in_ranges(hsp.subject_row, subject_positions, subject_masks)
    number_width = max(len(str(max(hsp.query_start, hsp.query_end) - 1)),
                       len(str(max(hsp.subject_start, hsp.subject_end) - 1)))
    rows, previous_end = [], [None, None]
    for first in range(0, hsp.length, line_length):
        last = min(first + line_length, hsp.length)
        for row, (letters, positions) in enumerate(((query_row, query_positions),
                                                    (subject_row, subject_positions))):
            rows.append(_sequence_line(row, letters[first:last], positions[first:last],
                                       first, number_width, previous_end))
            if row == 0:
                rows.append(" " * (len(ROW_NAMES[0]) + MARGIN + number_width + MARGIN)
                            + middle[first:last] + "\n")
        rows.append("\n")
    return rows


def _sequence_line(row: int, letters: str, positions: np.ndarray, first: int,
                   number_width: int, previous_end: list) -> str:
    """One row of one block: name, first position, letters, last position. The positions
    of a block without letters of this row are left out, as blastn leaves them out."""
    present = positions[positions > 0]
    start, end = (int(present[0]), int(present[-1])) if present.size else \
        (previous_end[row], previous_end[row])
    hidden = (first > 0 and end == previous_end[row]) or (first == 0 and start == 1 and end == 1)
    previous_end[row] = end
    start_text = "" if hidden else str(start)
    return (ROW_NAMES[row] + " " * MARGIN + start_text
            + " " * (number_width - len(start_text) + MARGIN) + letters + " " * MARGIN
            + ("" if hidden else str(end)) + "\n")


def _lower_in_ranges(row: str, positions: np.ndarray, ranges: np.ndarray) -> str:
    """The row with the letters whose (1-based) positions lie in `ranges` (0-based,
    half-open) in lower case."""
    letters = np.frombuffer(row.encode("ascii"), dtype=np.uint8).copy()
    offsets = positions - 1
    inside = np.zeros(letters.size, dtype=bool)
    for start, end in np.asarray(ranges).reshape(-1, 2).tolist():
        inside |= (offsets >= start) & (offsets < end)
    inside &= positions > 0
    letters[inside] |= 0x20
    return letters.tobytes().decode("ascii")


def _positions(row: str, first: int, step: int) -> np.ndarray:
    """The sequence position of each column's letter, 0 in a gap."""
    letters = np.frombuffer(row.encode("ascii"), dtype=np.uint8) != ord("-")
    positions = first + step * (np.cumsum(letters) - 1)
    return np.where(letters, positions, 0)
