"""A parsed -outfmt 6, 7 or 10 (its columns and delimiter), and what a search's process
needs of it before any result: the checks of the format string and outfmt 7's last line.
Numpy-free, so that a search sent to gblastn serve's cluster (which formats its results
there) parses its command line without numpy's import (drivers/served.py)."""

import re
from dataclasses import dataclass
from typing import TextIO

from ..errors import OptionsError

PROGRAM_VERSION = "BLASTN 2.12.0+"
NOT_AVAILABLE = "N/A"

DEFAULT_COLUMNS = ("qaccver", "saccver", "pident", "length", "mismatch", "gapopen",
                   "qstart", "qend", "sstart", "send", "evalue", "bitscore")

# keyword -> the name outfmt 7's "# Fields:" line gives it
FIELD_TITLES = {
    "qseqid": "query id", "qgi": "query gi", "qacc": "query acc.", "qaccver": "query acc.ver",
    "qlen": "query length", "sseqid": "subject id", "sallseqid": "subject ids",
    "sgi": "subject gi", "sallgi": "subject gis", "sacc": "subject acc.",
    "saccver": "subject acc.ver", "sallacc": "subject accs.", "slen": "subject length",
    "qstart": "q. start", "qend": "q. end", "sstart": "s. start", "send": "s. end",
    "qseq": "query seq", "sseq": "subject seq", "evalue": "evalue", "bitscore": "bit score",
    "score": "score", "length": "alignment length", "pident": "% identity",
    "nident": "identical", "mismatch": "mismatches", "positive": "positives",
    "gapopen": "gap opens", "gaps": "gaps", "ppos": "% positives",
    "frames": "query/sbjct frames", "qframe": "query frame", "sframe": "sbjct frame",
    "btop": "BTOP", "stitle": "subject title", "salltitles": "subject titles",
    "sstrand": "subject strand", "qcovs": "% query coverage per subject",
    "qcovhsp": "% query coverage per hsp", "qcovus": "% query coverage per uniq subject",
    "staxid": "subject tax id", "ssciname": "subject sci name", "scomname": "subject com names",
    "sblastname": "subject blast name", "sskingdom": "subject super kingdom",
    "staxids": "subject tax ids", "sscinames": "subject sci names",
    "scomnames": "subject com names", "sblastnames": "subject blast names",
    "sskingdoms": "subject super kingdoms",
}
# the names of a subject's taxa, which blastn looks up in NCBI's taxonomy name database: with
# none installed (gblastn never reads one) it prints N/A, one per taxid in these two
NAMES_PER_TAXID = ("sscinames", "scomnames")
TAXONOMY_NAMES = ("ssciname", "scomname", "sblastname", "sskingdom", "sblastnames",
                  "sskingdoms") + NAMES_PER_TAXID
# the columns for which blastn warns that the name database is missing
WARNED_NAMES = ("sscinames", "scomnames", "sblastnames", "sskingdoms")

SUPPORTED_KINDS = {6: "\t", 7: "\t", 10: ","}


@dataclass(frozen=True)
class TabularFormat:
    """A parsed -outfmt value: 6, 7 or 10, the columns in order, the field delimiter."""

    kind: int
    columns: tuple
    delimiter: str

    @property
    def with_comments(self) -> bool:
        return self.kind == 7

    @classmethod
    def parse(cls, spec: str) -> "TabularFormat":
        """Parse "6", "7 std qlen", "6 delim=, qseqid sseqid", "10 qseqid -qseqid ..."
        as BLAST 2.12 does (CFormattingArgs::ParseFormattingString, x_SetFieldsToShow):
        `std` adds the 12 default columns, `-name` removes a column, repeats are kept once,
        no column at all means the defaults, `delim=X` is only read right after the number.
        Unlike BLAST, which skips unknown keywords silently, an unknown keyword is an error."""
        text = spec.strip()
        choice, _, custom = text.partition(" ")
        custom_delim = ""
        if custom.startswith("delim"):
            first = custom.split(" ")[0]
            if "=" not in first:
                raise OptionsError("Delimiter format is invalid. "
                                   "Valid format is delim=<delimiter value>")
            custom_delim = first.split("=", 1)[1]
            custom = custom.replace(first, "")
        if not re.fullmatch(r"[+-]?\d+", choice):
            raise OptionsError(f"'{choice}' is not a valid output format")
        kind = int(choice)
        if kind not in SUPPORTED_KINDS:
            raise OptionsError(f"output format {kind} is not supported by gblastn: "
                               "use 6, 7 or 10")
        _check_delimiter(custom_delim, custom)
        return cls(kind, _parse_columns(custom), custom_delim or SUPPORTED_KINDS[kind])


# the separators of columns that list several values, in the order blastn checks them
LIST_SEPARATORS = {"sallseqid": ";", "staxids": ";", "sscinames": ";", "scomnames": ";",
                   "sblastnames": ";", "sskingdoms": ";", "salltitles": "<>", "frames": "/"}


def _check_delimiter(delimiter: str, custom: str) -> None:
    """blastn refuses a custom delimiter that a column named anywhere in the format (as a
    word's part: `-staxids` too) also separates its values with."""
    clash = next((name for name, separator in LIST_SEPARATORS.items()
                  if separator == delimiter and name in custom), None)
    if delimiter and clash is not None:
        raise OptionsError(f"Your custom record separator ({delimiter}) is also used by the "
                           f"format specifier ({clash}) to separate multiple entries. Please "
                           "use a different record separator (delim keyword).")


def _parse_columns(custom: str) -> tuple:
    columns: list = []

    def add(name):
        if name not in columns:
            columns.append(name)

    for token in custom.split(" "):
        if not token:
            continue
        if token == "std":
            for name in DEFAULT_COLUMNS:
                add(name)
        elif token[0] == "-":
            name = token[1:]
            _check_keyword(name)
            if name in columns:
                columns.remove(name)
        else:
            _check_keyword(token)
            add(token)
    return tuple(columns) if columns else DEFAULT_COLUMNS


def _check_keyword(name: str) -> None:
    if name in FIELD_TITLES:
        return
    raise OptionsError(f"'{name}' is not a valid output format column: see blastn -help "
                       "for the list of format specifiers")


def write_footer(out: TextIO, fmt: TabularFormat, num_queries: int) -> None:
    """outfmt 7's last line (nothing for 6 and 10)."""
    if fmt.with_comments:
        out.write(f"# BLAST processed {num_queries} queries\n")
