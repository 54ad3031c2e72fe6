"""HSP records shared by the extension, traceback, statistics and output stages.

Coordinates, everywhere in these records:

* query coordinates are **context-relative** (0 = first letter of that strand of that query,
  as BLAST's HSP query.offset); context c is query c // 2, plus strand when c is even, the
  reverse complement when odd;
* subject coordinates are 0-based on the subject's plus strand;
* every range is half-open: [start, end).

Stages pass these as structures of arrays (one numpy array per field), not lists of objects.
"""

from dataclasses import dataclass, field

import numpy as np

# Edit-script operations (traceback output): runs of one of these.
OP_SUB = 0  # aligned pair (match or mismatch): one query letter, one subject letter
OP_DEL = 1  # gap in the query: one subject letter against '-'   (BLAST eGapAlignDel)
OP_INS = 2  # gap in the subject: one query letter against '-'   (BLAST eGapAlignIns)


@dataclass
class Hsps:
    """Gapped HSPs (preliminary or traced) of one subject, as a structure of arrays."""

    context: np.ndarray        # int32
    q_start: np.ndarray        # int32, context-relative
    q_end: np.ndarray          # int32, exclusive
    s_start: np.ndarray        # int32
    s_end: np.ndarray          # int32, exclusive
    score: np.ndarray          # int32, raw score
    q_gapped_start: np.ndarray  # int32, the seed point the gapped extension started from
    s_gapped_start: np.ndarray  # int32
    evalue: np.ndarray = None   # float64, filled by stats
    bitscore: np.ndarray = None  # float64, filled by stats
    # traceback only: edit script of HSP i is ops[op_start[i]:op_start[i+1]] with run lengths
    op_start: np.ndarray = None  # int64, len n+1
    ops: np.ndarray = None       # uint8 (OP_*)
    op_len: np.ndarray = None    # int32

    def __len__(self) -> int:
        return int(self.score.size)

    @classmethod
    def empty(cls) -> "Hsps":
        z = np.zeros(0, dtype=np.int32)
        return cls(z, z, z, z, z, z, z, z)

    def take(self, index) -> "Hsps":
        """The HSPs at `index` (an index array or boolean mask), edit scripts included."""
        index = np.arange(len(self))[index]
        out = Hsps(*(getattr(self, f)[index] for f in
                     ("context", "q_start", "q_end", "s_start", "s_end", "score",
                      "q_gapped_start", "s_gapped_start")))
        if self.evalue is not None:
            out.evalue, out.bitscore = self.evalue[index], self.bitscore[index]
        if self.ops is not None:
            starts, ends = self.op_start[index], self.op_start[index + 1]
            sizes = ends - starts
            out.op_start = np.zeros(index.size + 1, dtype=np.int64)
            np.cumsum(sizes, out=out.op_start[1:])
            pick = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)]) \
                if index.size else np.zeros(0, dtype=np.int64)
            out.ops, out.op_len = self.ops[pick], self.op_len[pick]
        return out


@dataclass
class SubjectHits:
    """The final HSPs of one query against one subject, in BLAST's output order."""

    ordinal: int
    hsps: Hsps


@dataclass
class QueryResult:
    """Everything the output stage needs for one query."""

    query_index: int
    query_id: str
    query_defline: str
    query_length: int
    subjects: list = field(default_factory=list)  # of SubjectHits, in output order
