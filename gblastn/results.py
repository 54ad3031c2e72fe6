"""The Python API's results: one QueryResult per query, holding a Hit per subject, holding
the subject's HSPs, each with the values blastn's reports print (coordinates 1-based, the
aligned rows as the XML and pairwise reports show them).

Each converts to Biopython's objects: a QueryResult to a `Bio.SearchIO` QueryResult equal to
what `Bio.SearchIO` reads from blastn's XML of the same search, an HSP to a
`Bio.Align.Alignment` laid out as `Bio.Blast.parse` lays out blastn's HSPs. Biopython is
imported only by these conversions.
"""

import re
from dataclasses import dataclass, field

from .errors import MissingPackageError

PROGRAM = "blastn"
PROGRAM_VERSION = "BLASTN 2.12.0+"
# Bio.SearchIO's blast-xml reader splits a hit's "id title" line at these: several
# deflines of one subject are joined by " >", an id ends at the first spaces
_DEFLINES = re.compile(" +>")
_ID_END = re.compile(" +")


@dataclass(frozen=True)
class _Sequences:
    """What an HSP's alignment needs of the two sequences beside its rows."""

    query_description: str
    query_length: int
    hit_description: str
    hit_length: int


@dataclass
class HSP:
    """One high-scoring pair of a query and a subject, as blastn reports it.

    Coordinates are 1-based and inclusive, as blastn prints them: the query on its plus
    strand (query_start <= query_end); the subject reversed for a minus-strand hit
    (hit_start > hit_end). The rows are the aligned letters, '-' in a gap; `midline` has '|'
    under identical letters. `evalue` is 0 below 1e-180, as in blastn's reports.
    `fields` holds the tabular columns asked for (`search(columns=...)`), which
    `hsp["name"]` also reads."""

    query_id: str
    hit_id: str
    score: int
    bitscore: float
    evalue: float
    query_start: int
    query_end: int
    hit_start: int
    hit_end: int
    strand: str            # the subject's: "plus" or "minus"
    identities: int
    gaps: int              # letters against a gap, in both rows
    align_length: int
    query_seq: str
    hit_seq: str
    midline: str
    fields: dict = field(default_factory=dict, repr=False)
    _sequences: _Sequences = field(default=None, repr=False, compare=False)

    def __getitem__(self, column: str):
        return self.fields[column]

    def to_alignment(self):
        """This HSP as a `Bio.Align.Alignment` of [subject, query], coordinates and partly
        defined sequences as `Bio.Blast.parse` gives blastn's HSPs (a minus-strand subject
        reverse-complemented), with its score and annotations."""
        Alignment, Seq, SeqRecord = _biopython("Bio.Align.Alignment", "Bio.Seq.Seq",
                                               "Bio.SeqRecord.SeqRecord")
        known = self._sequences
        (hit_letters, query_letters), coordinates = Alignment.parse_printed_alignment(
            [self.hit_seq.encode(), self.query_seq.encode()])
        coordinates[1, :] += self.query_start - 1
        query = SeqRecord(Seq({self.query_start - 1: query_letters}, known.query_length),
                          self.query_id, description=known.query_description)
        hit = SeqRecord(None, self.hit_id, description=known.hit_description)
        if self.strand == "plus":
            coordinates[0, :] += self.hit_start - 1
            hit.seq = Seq({self.hit_start - 1: hit_letters}, known.hit_length)
        else:
            coordinates[0, :] = self.hit_start - coordinates[0, :]
            hit.seq = Seq({known.hit_length - self.hit_start: hit_letters},
                          known.hit_length).reverse_complement()
        alignment = Alignment([hit, query], coordinates)
        alignment.score = self.score
        alignment.annotations = {"bit score": self.bitscore, "evalue": self.evalue,
                                 "identity": self.identities, "positive": self.identities,
                                 "gaps": self.gaps, "midline": self.midline}
        return alignment


@dataclass
class Hit:
    """One subject's HSPs against a query, best first.

    `id` and `description` are the subject's as `Bio.SearchIO` reads them from blastn's XML
    (its first id, the rest of its title); `blast_id`, `title` and `accession` are the XML's
    Hit_id, Hit_def and Hit_accession; `ordinal` its place in the database."""

    id: str
    description: str
    length: int
    accession: str
    blast_id: str
    title: str
    ordinal: int
    hsps: list = field(default_factory=list)   # of HSP


@dataclass
class QueryResult:
    """One query's hits, best first, in the order blastn reports them.

    `id` is the query's id as blastn prints it (the first word of its defline, Query_N for a
    query without one, N its place in the input), `defline` its whole defline, `number` N."""

    id: str
    defline: str
    length: int
    number: int
    database: str
    task: str
    hits: list = field(default_factory=list)   # of Hit

    @property
    def description(self) -> str:
        """The defline after the id."""
        words = self.defline.split(" ", 1)
        return words[1] if len(words) == 2 and words[0] == self.id else ""

    @property
    def hsps(self) -> list:
        """Every HSP of every hit, in report order."""
        return [hsp for hit in self.hits for hsp in hit.hsps]

    @property
    def records(self) -> list:
        """One dict of tabular columns per HSP, in report order."""
        return [hsp.fields for hsp in self.hsps]

    def to_searchio(self):
        """This result as a `Bio.SearchIO` QueryResult, equal in ids, descriptions, scores,
        E-values (6 significant digits, as blastn's XML), coordinates and aligned rows to
        the one `Bio.SearchIO.read(xml, "blast-xml")` reads from blastn's -outfmt 5 of the
        same search."""
        SearchIOResult, = _biopython("Bio.SearchIO.QueryResult")
        result = SearchIOResult([_searchio_hit(hit, self.id) for hit in self.hits], self.id)
        result.description = self.description
        result.seq_len = self.length
        result.blast_id = f"Query_{self.number}"
        result.program, result.version, result.target = PROGRAM, PROGRAM_VERSION, self.database
        return result


def _searchio_hit(hit: Hit, query_id: str):
    SearchIOHit, = _biopython("Bio.SearchIO.Hit")
    found = SearchIOHit([_searchio_hsp(hsp, query_id, hit.id) for hsp in hit.hsps])
    ids, descriptions = subject_ids(hit.blast_id, hit.title)
    found.description = descriptions[0]
    found._id_alt, found._description_alt = ids[1:], descriptions[1:]
    found.blast_id, found.accession, found.seq_len = hit.blast_id, hit.accession, hit.length
    return found


def _searchio_hsp(hsp: HSP, query_id: str, hit_id: str):
    from .output.xml import six_digits

    SearchIOHSP, Fragment = _biopython("Bio.SearchIO.HSP", "Bio.SearchIO.HSPFragment")
    fragment = Fragment(hit_id, query_id)
    fragment.query_frame, fragment.hit_frame = 1, 1 if hsp.strand == "plus" else -1
    fragment.aln_span = hsp.align_length
    fragment.hit, fragment.query = hsp.hit_seq, hsp.query_seq
    fragment.aln_annotation["similarity"] = hsp.midline
    fragment.query_start, fragment.query_end = hsp.query_start - 1, hsp.query_end
    fragment.hit_start = min(hsp.hit_start, hsp.hit_end) - 1
    fragment.hit_end = max(hsp.hit_start, hsp.hit_end)
    fragment.molecule_type = "DNA"
    found = SearchIOHSP([fragment])
    found.bitscore, found.bitscore_raw = float(six_digits(hsp.bitscore)), hsp.score
    found.evalue = float(six_digits(hsp.evalue))
    found.ident_num = found.pos_num = hsp.identities
    found.gap_num = hsp.gaps
    return found


def subject_ids(blast_id: str, title: str) -> tuple:
    """(ids, descriptions) of a subject as Bio.SearchIO reads them from the XML's Hit_id
    and Hit_def: a database without parsed ids is known by its ordinal (gnl|BL_ORD_ID|N),
    so the ids are the title's."""
    line = title if blast_id.startswith("gnl|BL_ORD_ID|") else f"{blast_id} {title}"
    pairs = [_ID_END.split(part, maxsplit=1) + [""] for part in _DEFLINES.split(line)]
    return [pair[0] for pair in pairs], [pair[1] for pair in pairs]


def _biopython(*names: str) -> list:
    """The Biopython objects named (module.attribute), or MissingPackageError."""
    import importlib

    try:
        return [getattr(importlib.import_module(module), attribute)
                for module, attribute in (name.rsplit(".", 1) for name in names)]
    except ImportError:
        raise MissingPackageError("this conversion needs the biopython package: pip install "
                                  "biopython (or gblastn[bio])") from None


def query_result(query, result, db, db_name: str, task: str, columns: str) -> QueryResult:
    """The QueryResult of one query's search result (a gblastn.hsp.QueryResult) against
    `db`, with `columns` (tabular keywords) in each HSP's fields."""
    from .db.subjects import whole_length
    from .output.alignments import shown_hsps
    from .output.tabular import hit_records
    from .output.xml import subject_names

    records = iter(hit_records(query, result, db, columns))
    found = QueryResult(query.id, query.defline, len(query), result.query_index + 1,
                        db_name, task)
    for subject in (subject for subject in result.subjects if len(subject.hsps)):
        blast_id, title, accession = subject_names(db, subject.ordinal)
        ids, descriptions = subject_ids(blast_id, title)
        hit = Hit(ids[0], descriptions[0], whole_length(db, subject.ordinal), accession,
                  blast_id, title, subject.ordinal)
        sequences = _Sequences(found.description, found.length, hit.description, hit.length)
        for shown in shown_hsps(query, db, subject):
            hit.hsps.append(HSP(
                found.id, hit.id, shown.score, shown.bitscore, shown.evalue,
                shown.query_start, shown.query_end, shown.subject_start, shown.subject_end,
                "minus" if shown.minus else "plus", shown.identities, shown.gaps,
                shown.length, shown.query_row, shown.subject_row, shown.midline(),
                next(records), sequences))
        found.hits.append(hit)
    return found
