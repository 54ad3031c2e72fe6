"""BLAST XML: -outfmt 5, byte for byte as blastn 2.12 writes it (blastxml_format.cpp, which
writes the NCBI_BlastOutput DTD's objects through the serial library's XML stream, one
query's iteration at a time).

What it takes from the search: per HSP the rows the tabular writer shows (qseq, sseq), the
score, bit score and E-value; per query the statistics of its first valid context
(output.statistics).
"""

from dataclasses import dataclass

from ..db.seqid import describe, fasta_id_text, ids_parsed
from ..db.subjects import is_subject_set, subject_number, whole_length
from ..db.subset import filtered_to_nothing
from ..query import FILTERED_EMPTY, INVALID_QUERY, NO_DATA, local_id
from .alignments import shown_hsps
from .statistics import query_statistics

PROGRAM = "blastn"
PROGRAM_VERSION = "BLASTN 2.12.0+"

# CReference::GetString; blastn escapes the second reference's HTML entity once more
# (Sch&amp;auml;ffer): kept, the output is blastn's byte for byte
MEGABLAST_REFERENCE = ('Zheng Zhang, Scott Schwartz, Lukas Wagner, and Webb Miller (2000), '
                       '"A greedy algorithm for aligning DNA sequences", '
                       'J Comput Biol 2000; 7(1-2):203-14.')
GAPPED_BLAST_REFERENCE = ('Stephen F. Altschul, Thomas L. Madden, Alejandro A. Sch&auml;ffer, '
                          'Jinghui Zhang, Zheng Zhang, Webb Miller, and David J. Lipman (1997), '
                          '"Gapped BLAST and PSI-BLAST: a new generation of protein database '
                          'search programs", Nucleic Acids Res. 25:3389-3402.')
NO_DEFINITION = "No definition line"
NO_HITS = "No hits found"

_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "'": "&apos;", '"': "&quot;"}
_ESCAPE_TABLE = str.maketrans(_ESCAPES)


def escape(text: str) -> str:
    """Text as the serial library's XML stream writes it (CObjectOStreamXml::
    WriteEscapedChar): the five markup characters as entities, a control character as a
    character reference."""
    text = text.translate(_ESCAPE_TABLE)
    if any(ord(c) < 0x20 for c in text):
        text = "".join(f"&#x{ord(c):x};" if ord(c) < 0x20 else c for c in text)
    return text


def real(value: float) -> str:
    """A double as the XML stream writes it: %.15g (DBL_DIG digits)."""
    return "%.15g" % value


def six_digits(value: float) -> str:
    """Bit scores and E-values: blastn rounds them to 6 significant digits first."""
    return real(float("%.6g" % value))


def reference(task: str) -> str:
    return MEGABLAST_REFERENCE if task == "megablast" else GAPPED_BLAST_REFERENCE


def filter_string(options) -> str:
    """BLAST's description of the query filtering: 'L;' for DUST with its default
    parameters (else 'D level window linker;'), 'W -d FILE;' for -window_masker_db (as
    given), 'm;' for soft masking, 'F' for none."""
    from ..options import DustOptions

    text = ""
    if options.dust is not None:
        dust = options.dust
        given = dust.given or (dust.level, dust.window, dust.linker)
        defaults = DustOptions()
        text += "L;" if given == (defaults.level, defaults.window, defaults.linker) else \
            "D {} {} {};".format(*given)
    if options.window_masker_db is not None:
        text += f"W -d {options.window_masker_db};"
    if options.soft_masking:
        text += "m;"
    return text or "F"


def query_definition(query) -> str:
    from ..query import report_title

    return report_title(query.defline or "") or NO_DEFINITION


def subject_names(db, ordinal: int) -> tuple:
    """(Hit_id, Hit_def, Hit_accession) as blastn gives them: for -subject the first word
    of the defline (Subject_N, its place in the file, without one), the defline, and
    Subject_N; without parsed ids a
    database's sequences are known by their ordinal (gnl|BL_ORD_ID|N) and the whole defline
    is the title; with them, the ids, the title, and the accession without its version."""
    from .tabular import report_accession

    if is_subject_set(db):  # -subject's: its id, its defline, its place in the file
        return (db.seq_id(ordinal), db.shown_defline(ordinal) or NO_DEFINITION,
                subject_number(db, ordinal))
    if not ids_parsed(db, ordinal):
        return f"gnl|BL_ORD_ID|{ordinal}", db.defline(ordinal) or NO_DEFINITION, str(ordinal)
    texts = db.defline_texts(ordinal)
    if len(texts) == 1:
        return (db.seq_id(ordinal), db.title_of(ordinal) or NO_DEFINITION,
                report_accession(db, ordinal))
    # several deflines: the first's id and title, then ' >' and each later one's ids and title
    first_id, _, first_title = describe(texts[0], True)
    later = [fasta_id_text(text) + " " + describe(text, True)[2] for text in texts[1:]]
    return first_id, " >".join([first_title] + later), report_accession(db, ordinal)


def _element(indent: int, name: str, value) -> str:
    return f"{' ' * indent}<{name}>{value}</{name}>\n"


@dataclass
class XmlReport:
    """-outfmt 5: render() gives each query's iteration (the first with the document's
    head), footer() the document's end."""

    says_empty_queries = True  # blastn writes no warning of them on stderr

    options: object
    db_name: str

    def render(self, pairs: list, db) -> list:
        statistics = query_statistics([query for query, _ in pairs], db, self.options)
        texts = []
        for (query, result), stats in zip(pairs, statistics):
            text = self._iteration(query, result, stats, db)
            if result.query_index == 0:
                text = self._head(query, result, db) + text
            texts.append(text)
        return texts

    def footer(self, db, count: int) -> str:
        return "</BlastOutput_iterations>\n</BlastOutput>\n\n" if count else ""

    def _head(self, query, result, db) -> str:
        options = self.options
        return "".join([
            '<?xml version="1.0"?>\n',
            '<!DOCTYPE BlastOutput PUBLIC "-//NCBI//NCBI BlastOutput/EN" '
            '"http://www.ncbi.nlm.nih.gov/dtd/NCBI_BlastOutput.dtd">\n',
            "<BlastOutput>\n",
            _element(2, "BlastOutput_program", PROGRAM),
            _element(2, "BlastOutput_version", PROGRAM_VERSION),
            _element(2, "BlastOutput_reference", escape(reference(options.task))),
            # blastn names no database for -subject
            _element(2, "BlastOutput_db", "" if is_subject_set(db) else escape(self.db_name)),
            _element(2, "BlastOutput_query-ID", local_id(query, result.query_index)),
            _element(2, "BlastOutput_query-def", escape(query_definition(query))),
            _element(2, "BlastOutput_query-len", query.searched_length),
            "  <BlastOutput_param>\n    <Parameters>\n",
            _element(6, "Parameters_expect", real(options.evalue)),
            _element(6, "Parameters_sc-match", options.reward),
            _element(6, "Parameters_sc-mismatch", options.penalty),
            _element(6, "Parameters_gap-open", options.gapopen),
            _element(6, "Parameters_gap-extend", options.gapextend),
            _element(6, "Parameters_filter", filter_string(options)),
            "    </Parameters>\n  </BlastOutput_param>\n<BlastOutput_iterations>\n"])

    def _iteration(self, query, result, stats, db) -> str:
        number = result.query_index + 1
        parts = ["<Iteration>\n",
                 _element(2, "Iteration_iter-num", number),
                 _element(2, "Iteration_query-ID", local_id(query, result.query_index)),
                 _element(2, "Iteration_query-def", escape(query_definition(query))),
                 _element(2, "Iteration_query-len", query.searched_length),
                 "<Iteration_hits>\n"]
        subjects = [subject for subject in result.subjects if len(subject.hsps)]
        for hit_number, subject in enumerate(subjects, 1):
            parts.append(_hit(hit_number, subject, query, db))
        parts += ["</Iteration_hits>\n", _statistics(stats, db)]
        if not subjects:
            parts.append(_element(2, "Iteration_message",
                                  escape(no_hits_message(query, number, stats, db))))
        parts.append("</Iteration>\n")
        return "".join(parts)


def no_hits_message(query, number: int, stats=None, db=None) -> str:
    """blastn's message: that of a query without letters to search (an empty record, or
    one -query_loc starts just after), or without statistics (all N, or all masked), or
    searched in a database its filter left empty, carries its warnings, twice, in its
    words."""
    warnings = []
    if not query.searched_length:
        warnings.append(NO_DATA)
    elif stats is not None and stats.invalid:
        warnings.append(INVALID_QUERY)
    if filtered_to_nothing(db):
        warnings.append(FILTERED_EMPTY)
    if not warnings:
        return NO_HITS
    label = " ".join(filter(None, (local_id(query, number - 1), query.defline)))
    return f"{label}:  {label}: {' '.join(warnings)}  {NO_HITS}"


def _statistics(stats, db) -> str:
    block = stats.of_evalues
    kappa, lambda_, entropy = (block.k, block.lambda_, block.h) if block else (-1, -1, -1)
    return "".join([
        "  <Iteration_stat>\n    <Statistics>\n",
        # blastn counts -subject's sequences in the search space only
        _element(6, "Statistics_db-num", 0 if is_subject_set(db) else db.num_seqs),
        _element(6, "Statistics_db-len", 0 if is_subject_set(db) else db.total_letters),
        _element(6, "Statistics_hsp-len", stats.length_adjustment),
        _element(6, "Statistics_eff-space", real(stats.search_space)),
        _element(6, "Statistics_kappa", real(kappa)),
        _element(6, "Statistics_lambda", real(lambda_)),
        _element(6, "Statistics_entropy", real(entropy)),
        "    </Statistics>\n  </Iteration_stat>\n"])


def _hit(number: int, subject, query, db) -> str:
    hit_id, definition, accession = subject_names(db, subject.ordinal)
    parts = ["<Hit>\n",
             _element(2, "Hit_num", number),
             _element(2, "Hit_id", escape(hit_id)),
             _element(2, "Hit_def", escape(definition)),
             _element(2, "Hit_accession", escape(accession)),
             _element(2, "Hit_len", whole_length(db, subject.ordinal)),
             "  <Hit_hsps>\n"]
    for hsp_number, hsp in enumerate(shown_hsps(query, db, subject), 1):
        identities = hsp.identities
        parts += ["    <Hsp>\n",
                  _element(6, "Hsp_num", hsp_number),
                  _element(6, "Hsp_bit-score", six_digits(hsp.bitscore)),
                  _element(6, "Hsp_score", hsp.score),
                  _element(6, "Hsp_evalue", six_digits(hsp.evalue)),
                  _element(6, "Hsp_query-from", hsp.query_start),
                  _element(6, "Hsp_query-to", hsp.query_end),
                  _element(6, "Hsp_hit-from", hsp.subject_start),
                  _element(6, "Hsp_hit-to", hsp.subject_end),
                  _element(6, "Hsp_query-frame", 1),
                  _element(6, "Hsp_hit-frame", -1 if hsp.minus else 1),
                  _element(6, "Hsp_identity", identities),
                  _element(6, "Hsp_positive", identities),
                  _element(6, "Hsp_gaps", hsp.gaps),
                  _element(6, "Hsp_align-len", hsp.length),
                  _element(6, "Hsp_qseq", hsp.query_row),
                  _element(6, "Hsp_hseq", hsp.subject_row),
                  _element(6, "Hsp_midline", hsp.midline()),
                  "    </Hsp>\n"]
    parts.append("  </Hit_hsps>\n</Hit>\n")
    return "".join(parts)
