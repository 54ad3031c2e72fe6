"""gblastn: GPU-accelerated nucleotide database search with NCBI BLAST+ 2.12's answers.

Public API: `make_db`, `open_db`, `search`, `make_options`.
Heavy modules (numba stages, pycuda) load lazily, on first use.
"""

import os

__version__ = "0.1.0"

__all__ = ["make_db", "open_db", "search", "make_options", "__version__"]


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


def __getattr__(name):
    if name == "make_db":
        from .db.writer import make_db
        return make_db
    if name == "open_db":
        from .db.reader import open_db
        return open_db
    if name == "search":
        from .drivers.api import search
        return search
    if name == "make_options":
        from .options import make_options
        return make_options
    raise AttributeError(name)
