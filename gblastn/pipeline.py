"""The search driver: queries in, tabular output out, written atomically.

The serial driver runs the engine batch by batch and writes each query's lines as soon as
its batch is done, in input order.
"""

import os
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass

from .errors import InputError, OutputError


@dataclass
class OutputSpec:
    outfmt: str = "6"
    out: str | None = None        # None or '-': standard output
    out_dir: str | None = None    # one output per listed query file
    db_name: str = ""             # as the user gave it, for '# Database:'


@contextmanager
def atomic_output(path: str | None):
    """A text stream that becomes `path` only when the block completes; stdout for None/'-'."""
    if path in (None, "-"):
        yield sys.stdout
        sys.stdout.flush()
        return
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".gblastn-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def query_files(query: str | None, query_list: str | None) -> list:
    """The FASTA files to search, from -query or -query_list."""
    from .query import read_query_list

    if (query is None) == (query_list is None):
        raise InputError("give exactly one of -query and -query_list")
    if query is not None:
        return [query]
    return read_query_list(query_list)


def run_search(files: list, db_path: str, options, output: OutputSpec, backend=None) -> int:
    """Search every query of `files`; one output, or one per file with out_dir. Returns the
    number of queries searched."""
    from .db.reader import open_db
    from .output.tabular import TabularFormat

    fmt = TabularFormat.parse(output.outfmt)
    with open_db(db_path) as db:
        if output.out_dir:
            os.makedirs(output.out_dir, exist_ok=True)
            total = 0
            for path in files:
                name = os.path.splitext(os.path.basename(path))[0] + ".out"
                with atomic_output(os.path.join(output.out_dir, name)) as out:
                    total += _search_into(out, fmt, [path], db, options, output, backend)
            return total
        with atomic_output(output.out) as out:
            return _search_into(out, fmt, files, db, options, output, backend)


def _search_into(out, fmt, files, db, options, output: OutputSpec, backend) -> int:
    from .engine import search_queries
    from .output.tabular import write_footer, write_header, write_query
    from .query import read_queries

    queries = [q for path in files for q in read_queries(path)]
    for query, result in zip(queries, search_queries(queries, db, options, backend)):
        if fmt.with_comments:
            write_header(out, fmt, query, output.db_name,
                         sum(len(s.hsps) for s in result.subjects))
        write_query(out, fmt, query, result, db, db_name=output.db_name)
    if fmt.with_comments:
        write_footer(out, fmt, len(queries))
    return len(queries)
