"""-outfmt: which report a search writes. Every report has the same two calls, which the
search driver makes: render(pairs, db), the text of each (query, result) pair, in order (the
first query's with the report's head), and footer(db, count), the text after the last
query."""

import re
from dataclasses import dataclass

from ..errors import OptionsError
from .tabular import SUPPORTED_KINDS, TabularFormat, format_queries, write_footer

XML = 5
SUPPORTED = (XML, *SUPPORTED_KINDS)


@dataclass
class TabularReport:
    """-outfmt 6, 7 and 10."""

    fmt: TabularFormat
    db_name: str

    def render(self, pairs: list, db) -> list:
        return format_queries(self.fmt, pairs, db, db_name=self.db_name)

    def footer(self, db, count: int) -> str:
        import io

        text = io.StringIO()
        write_footer(text, self.fmt, count)
        return text.getvalue()


def output_format(outfmt: str, options, db_name: str):
    """The report that `-outfmt` names, for a search with `options` of the database the user
    called `db_name`. Columns after a number other than 6, 7 and 10 are ignored, as blastn
    ignores them."""
    from .xml import XmlReport

    choice = outfmt.strip().partition(" ")[0]
    if re.fullmatch(r"[+-]?\d+", choice) and int(choice) == XML:
        return XmlReport(options, db_name)
    if re.fullmatch(r"[+-]?\d+", choice) and int(choice) not in SUPPORTED_KINDS:
        raise OptionsError(f"output format {int(choice)} is not supported by gblastn: use "
                           + ", ".join(map(str, SUPPORTED[:-1])) + f" or {SUPPORTED[-1]}")
    return TabularReport(TabularFormat.parse(outfmt), db_name)

