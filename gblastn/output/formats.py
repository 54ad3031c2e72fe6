"""-outfmt: which report a search writes. Every report has the same two calls, which the
search driver makes: render(pairs, db), the text of each (query, result) pair, in order (the
first query's with the report's head), and footer(db, count), the text after the last
query."""

import importlib
import re
import threading
from dataclasses import dataclass, field

from ..errors import OptionsError
from .tabular_format import SUPPORTED_KINDS, WARNED_NAMES, TabularFormat, write_footer

# -outfmt's numbers; each report's module is imported when it is chosen, or for a
# DeferredReport at its first text (a search that writes one report loads no other)
PAIRWISE = 0
QUERY_ANCHORED = (1, 2, 3, 4)
XML = 5
JSON, XML2, JSON_SINGLE, XML2_SINGLE = 13, 14, 15, 16  # blastoutput2.py's reports
SAM = 17
# -outfmt 0's defaults
DEFAULT_DESCRIPTIONS = 500
DEFAULT_ALIGNMENTS = 250
DEFAULT_LINE_LENGTH = 60
SUPPORTED = (PAIRWISE, XML, *SUPPORTED_KINDS, JSON, XML2, JSON_SINGLE, XML2_SINGLE, SAM)


@dataclass
class TabularReport:
    """-outfmt 6, 7 and 10."""

    fmt: TabularFormat
    db_name: str

    def render(self, pairs: list, db) -> list:
        from .tabular import format_queries  # numpy's: not in a served search's process

        return format_queries(self.fmt, pairs, db, db_name=self.db_name)

    def footer(self, db, count: int) -> str:
        import io

        if not count:  # blastn writes nothing for an input without a query
            return ""
        text = io.StringIO()
        write_footer(text, self.fmt, count)
        return text.getvalue()


@dataclass
class DeferredReport:
    """-outfmt 0 or 5: the report `module`.`name`(*args), its module (numpy's, the
    database's) imported when its first text is made rather than when the options are
    checked: a search sent through gblastn serve's door, whose process makes the texts,
    never imports it. Pickled as what it is made of."""

    module: str
    name: str
    args: tuple
    _made: object = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __reduce__(self):
        return DeferredReport, (self.module, self.name, self.args)

    def report(self):
        with self._lock:
            if self._made is None:
                module = importlib.import_module(f"{__package__}.{self.module}")
                self._made = getattr(module, self.name)(*self.args)
            return self._made

    @property
    def says_empty_queries(self) -> bool:
        """The XML report carries an empty query's warning (the pairwise one does not)."""
        return self.module == "xml"

    def render(self, pairs: list, db) -> list:
        return self.report().render(pairs, db)

    def footer(self, db, count: int) -> str:
        return self.report().footer(db, count)


def output_format(outfmt: str, options, db_name: str, command_line: str = "", **pairwise):
    """The report that `-outfmt` names, for a search with `options` of the database the user
    called `db_name`; `command_line` is the search's, for SAM's @PG line; `pairwise` holds
    -outfmt 0's settings that were given (line_length, num_descriptions, num_alignments,
    show_gis). Words after a number other than 6, 7, 10 and 17 are ignored, as blastn
    ignores them."""
    choice, _, words = outfmt.strip().partition(" ")
    if re.fullmatch(r"[+-]?\d+", choice) and int(choice) == XML:
        return DeferredReport("xml", "XmlReport", (options, db_name))
    if re.fullmatch(r"[+-]?\d+", choice) and int(choice) in (JSON, JSON_SINGLE):
        from .json_report import JsonReport
        return JsonReport(options, db_name, single_file=int(choice) == JSON_SINGLE)
    if re.fullmatch(r"[+-]?\d+", choice) and int(choice) in (XML2, XML2_SINGLE):
        from .xml2 import Xml2Report
        return Xml2Report(options, db_name, single_file=int(choice) == XML2_SINGLE)
    if re.fullmatch(r"[+-]?\d+", choice) and int(choice) == SAM:
        from .sam import SamReport
        return SamReport(words, command_line, ungapped=options.ungapped)
    if re.fullmatch(r"[+-]?\d+", choice) and int(choice) == PAIRWISE:
        return DeferredReport("pairwise", "PairwiseReport",
                              (options, db_name, *_pairwise_settings(**pairwise)))
    if re.fullmatch(r"[+-]?\d+", choice) and int(choice) not in SUPPORTED_KINDS:
        kind = " (query-anchored)" if int(choice) in QUERY_ANCHORED else ""
        raise OptionsError(f"output format {int(choice)}{kind} is not supported by gblastn: use "
                           + ", ".join(map(str, SUPPORTED[:-1])) + f" or {SUPPORTED[-1]}")
    return TabularReport(TabularFormat.parse(outfmt), db_name)


def _pairwise_settings(line_length=None, num_descriptions=None, num_alignments=None,
                       show_gis=None) -> tuple:
    """PairwiseReport's settings after options and db_name, blastn's defaults where not
    given."""
    return (DEFAULT_LINE_LENGTH if line_length is None else line_length,
            DEFAULT_DESCRIPTIONS if num_descriptions is None else num_descriptions,
            DEFAULT_ALIGNMENTS if num_alignments is None else num_alignments,
            bool(show_gis))


def query_warnings(report, warn):
    """The warn function of a search's query reader for `report`: blastn writes its
    warnings of a query without letters to search, or without statistics, or of a filtered
    database without sequences, on stderr only where the report does not carry them (XML,
    JSON, SAM)."""
    from ..query import FILTERED_EMPTY, INVALID_QUERY, NO_DATA

    if not getattr(report, "says_empty_queries", False):
        return warn

    def warn_unless_carried(text: str) -> None:
        if not text.endswith((f": {NO_DATA} ", f": {INVALID_QUERY} ", f" {FILTERED_EMPTY} ")):
            warn(text)
    return warn_unless_carried


def warn_missing_taxonomy_names(outfmt: str, warn) -> None:
    """blastn's warning, once a search, that the taxonomy names a tabular report asks for
    need NCBI's name database (which gblastn never reads: it prints N/A, as blastn without
    it)."""
    choice = outfmt.strip().partition(" ")[0]
    if not re.fullmatch(r"[+-]?\d+", choice) or int(choice) not in SUPPORTED_KINDS:
        return
    if set(TabularFormat.parse(outfmt).columns) & set(WARNED_NAMES):
        from ..db.taxonomy import NAMES_WARNING
        warn(NAMES_WARNING)


@dataclass(frozen=True)
class ReportLimits:
    """How many subjects the search keeps and the pairwise report shows."""

    max_target_seqs: int | None   # for the search; None: its default
    num_descriptions: int | None  # for -outfmt 0; None: the report's default
    num_alignments: int | None


def report_limits(outfmt: str, max_target_seqs=None, num_descriptions=None,
                  num_alignments=None, line_length=None, warn=print) -> ReportLimits:
    """blastn's resolution of -max_target_seqs, -num_descriptions and -num_alignments
    (CFormattingArgs::ExtractAlgorithmOptions). The last two go with the pairwise report
    and may not be given with the first. For it, -max_target_seqs sets both, and the search
    keeps as many subjects as the larger of the two when either is given. For the other
    formats -num_alignments stands for -max_target_seqs, -num_descriptions and
    -line_length are ignored with a warning. `warn` takes blastn's warnings."""
    if max_target_seqs is not None and max_target_seqs < 1:
        # refused before any warning, as blastn's argument check refuses it
        raise OptionsError("-max_target_seqs must be at least 1")
    for flag, value in (("-num_descriptions", num_descriptions),
                        ("-num_alignments", num_alignments)):
        if value is not None and max_target_seqs is not None:
            raise OptionsError(f"{flag} cannot be given with -max_target_seqs")
        if value is not None and value < 0:
            raise OptionsError(f"{flag} must be at least 0")
    if line_length is not None and line_length < 1:
        raise OptionsError("-line_length must be at least 1")
    choice = outfmt.strip().partition(" ")[0]
    if re.fullmatch(r"[+-]?\d+", choice) and int(choice) == PAIRWISE:
        limits = _pairwise_limits(max_target_seqs, num_descriptions, num_alignments,
                                  DEFAULT_DESCRIPTIONS, DEFAULT_ALIGNMENTS)
    else:
        if num_descriptions is not None:
            warn("Warning: [blastn] The parameter -num_descriptions is ignored for output "
                 "formats > 4 . Use -max_target_seqs to control output")
        if line_length is not None:
            warn("Warning: [blastn] The parameter -line_length is not applicable for "
                 "output formats > 4 .")
        kept = max_target_seqs if max_target_seqs is not None else num_alignments
        limits = ReportLimits(kept, None, None)
    kept = limits.max_target_seqs
    if kept == 0:
        raise OptionsError("No hits are being saved: -num_descriptions and -num_alignments "
                           "are both 0")
    if kept is not None and kept < 5:
        warn("Warning: [blastn] Examining 5 or more matches is recommended")
    return limits


def _pairwise_limits(max_target_seqs, num_descriptions, num_alignments, default_descriptions,
                     default_alignments) -> ReportLimits:
    if max_target_seqs is not None:
        return ReportLimits(max_target_seqs, max_target_seqs, max_target_seqs)
    if num_descriptions is None and num_alignments is None:
        return ReportLimits(None, None, None)
    descriptions = default_descriptions if num_descriptions is None else num_descriptions
    alignments = default_alignments if num_alignments is None else num_alignments
    return ReportLimits(max(descriptions, alignments), descriptions, alignments)
