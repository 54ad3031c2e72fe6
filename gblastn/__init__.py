"""gblastn: GPU-accelerated nucleotide database search with NCBI BLAST+ 2.12's answers.

Public API: `make_db`, `open_db`, `search`, `make_options`.
Heavy modules (numba stages, pycuda) load lazily, on first use.
"""

__version__ = "0.1.0"

__all__ = ["make_db", "open_db", "search", "make_options", "__version__"]


def __getattr__(name):
    if name == "make_db":
        from .db.writer import make_db
        return make_db
    if name == "open_db":
        from .db.reader import open_db
        return open_db
    if name == "search":
        from .engine import search
        return search
    if name == "make_options":
        from .options import make_options
        return make_options
    raise AttributeError(name)
