"""gblastn: nucleotide database search with NCBI BLAST+ 2.12 blastn's answers, on a GPU or
the CPU.

    >>> import gblastn
    >>> for result in gblastn.search_iter("queries.fa", "db/example", task="megablast"):
    ...     for hit in result.hits:
    ...         print(result.id, hit.id, [(hsp.evalue, hsp.bitscore) for hsp in hit.hsps])

search(queries, db, **options) returns a list of QueryResult, search_iter yields them one
query at a time. A QueryResult holds a Hit per subject, a Hit its HSPs (scores, E-value,
1-based coordinates, aligned rows); result.to_searchio() and hsp.to_alignment() give
Biopython's objects. make_db builds a database from FASTA files, open_db opens one (a gblastn
or BLAST+ database), make_options validates options ahead of a search.
Heavy modules (numba stages, pycuda) load lazily, on first use. The modules help() lists
under PACKAGE CONTENTS implement the search stage by stage; the API is the names below.

Options of search and search_iter, with their defaults (a task's own in parentheses):
"""

import os

__version__ = "0.1.0"

__all__ = ["search", "search_iter", "QueryResult", "Hit", "HSP", "make_db", "open_db",
           "make_options", "GblastnError", "__version__"]


def _use_gblastn_numba_cache() -> None:
    """numba's own cache (its runtime; gblastn's functions are keyed by compile_cache) in
    gblastn's cache folder, unless the user chose one."""
    if "NUMBA_CACHE_DIR" in os.environ:
        return
    from .compile_cache import numba_cache_dir

    folder = numba_cache_dir()
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return  # no writable cache home: numba's default places apply
    os.environ["NUMBA_CACHE_DIR"] = folder


_use_gblastn_numba_cache()


def _add_option_defaults() -> None:
    global __doc__
    from .options import describe_defaults

    __doc__ += describe_defaults() + "\n"


_add_option_defaults()

# where each public name lives; imported on first use
_PUBLIC = {"search": "drivers.api", "search_iter": "drivers.api", "QueryResult": "results",
           "Hit": "results", "HSP": "results", "make_db": "db.writer", "open_db": "db.reader",
           "make_options": "options", "GblastnError": "errors"}


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'gblastn' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)


def __dir__():
    """The public API only (what help(gblastn) documents), not the modules that implement
    it."""
    return list(__all__)
