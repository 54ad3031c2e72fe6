"""The HSPs of a query's result as the report formats show them (XML, pairwise, SAM): the
query on its plus strand, the subject reversed for a minus-strand hit, both rows as
letters, and the counts BLAST takes from those rows."""

from dataclasses import dataclass

import numpy as np

from ..alphabet import IUPAC_FROM_BLASTNA
from ..db.subjects import letters_before
from .tabular import display_hsp

GAP = "-"
# BLAST's Seq-aligns, which its report formats read, hold E-values below this as 0
# (blast_seqalign.cpp, s_BuildScoreList)
SMALLEST_EVALUE = 1.0e-180


@dataclass
class ShownHsp:
    score: int
    bitscore: float
    evalue: float
    query_start: int     # 1-based, query_start <= query_end
    query_end: int
    subject_start: int   # 1-based; subject_start > subject_end on the minus strand
    subject_end: int
    minus: bool
    query_row: str       # letters, '-' in a gap
    subject_row: str
    masked_identities: int | None = None  # -db_hard_mask: the traceback's, on masked letters

    @property
    def length(self) -> int:
        return len(self.query_row)

    @property
    def identities(self) -> int:
        """Columns with the same letter in both rows (N against N included, as BLAST's
        formatters count them)."""
        return int(np.count_nonzero(_codes(self.query_row) == _codes(self.subject_row)))

    @property
    def gaps(self) -> int:
        return self.query_row.count(GAP) + self.subject_row.count(GAP)

    def midline(self) -> str:
        """'|' under identical letters, ' ' elsewhere."""
        same = _codes(self.query_row) == _codes(self.subject_row)
        return np.where(same, ord("|"), ord(" ")).astype(np.uint8).tobytes().decode("ascii")


def _codes(row: str) -> np.ndarray:
    return np.frombuffer(row.encode("ascii"), dtype=np.uint8)


def shown_hsps(query, db, subject) -> list:
    """The ShownHsp of each HSP of `subject` (a SubjectHits), in its order; subject
    coordinates on the whole subject where -subject_loc searched a part."""
    hsps = subject.hsps
    before = int(letters_before(db, subject.ordinal))
    shown = []
    for i in range(len(hsps)):
        first, last = int(hsps.op_start[i]), int(hsps.op_start[i + 1])
        s_start, s_end = int(hsps.s_start[i]), int(hsps.s_end[i])
        rows = display_hsp(query.codes, int(hsps.context[i]), int(hsps.q_start[i]),
                           int(hsps.q_end[i]), s_start, s_end,
                           db.blastna(subject.ordinal, s_start, s_end),
                           hsps.ops[first:last], hsps.op_len[first:last])
        masked = None if hsps.masked_identities is None else int(hsps.masked_identities[i])
        shown.append(ShownHsp(int(hsps.score[i]), float(hsps.bitscore[i]),
                              _shown_evalue(float(hsps.evalue[i])), rows.qstart, rows.qend,
                              rows.sstart + before, rows.send + before, rows.minus,
                              _letters(rows.qseq), _letters(rows.sseq), masked))
    return shown


def _shown_evalue(evalue: float) -> float:
    return 0.0 if evalue < SMALLEST_EVALUE else evalue


def _letters(row: np.ndarray) -> str:
    return IUPAC_FROM_BLASTNA[row].tobytes().decode("ascii")


def mask_of(length: int, ranges: tuple) -> np.ndarray:
    """The query's masked positions from its half-open masked ranges."""
    mask = np.zeros(length, dtype=bool)
    for start, end in ranges:
        mask[start:end] = True
    return mask


def lower_masked(row: str, first: int, masked: np.ndarray) -> str:
    """The query row with its masked letters in lower case."""
    letters = np.frombuffer(row.encode("ascii"), dtype=np.uint8).copy()
    in_gap = letters == ord("-")
    positions = first - 1 + np.cumsum(~in_gap) - 1
    lower = ~in_gap & masked[np.clip(positions, 0, masked.size - 1)]
    letters[lower] = letters[lower] | 0x20
    return letters.tobytes().decode("ascii")
