"""gblastn: GPU-accelerated nucleotide database search with NCBI BLAST+ 2.12's answers.

Public API: `make_db`, `open_db`, `search`, `make_options`.
Heavy modules (numba stages, pycuda) load lazily, on first use.
"""

import os
import zlib

__version__ = "0.1.0"

__all__ = ["make_db", "open_db", "search", "make_options", "__version__"]


def _numba_cache_dir() -> str:
    """A numba cache folder keyed by the package's sources.

    numba's own cache notices a change to a function's module but not to the functions it
    calls in other modules (they are compiled into the caller), so after an upgrade or an edit
    a cached stage could run old code. Keying the folder by every module's size and time
    rules that out; the price is one recompilation after each change. The key is two zlib
    checksums: hashlib would load OpenSSL into every gblastn process, makedb's included,
    a sizeable part of its memory (docs/perf/makedb.md).
    """
    package = os.path.dirname(os.path.abspath(__file__))
    text = __version__
    for folder, _, files in sorted(os.walk(package)):
        for name in sorted(files):
            if name.endswith(".py"):
                info = os.stat(os.path.join(folder, name))
                text += f"{name}:{info.st_size}:{info.st_mtime_ns};"
    data = text.encode()
    key = f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gblastn", "numba-" + key)


def _use_keyed_numba_cache() -> None:
    if "NUMBA_CACHE_DIR" in os.environ:
        return
    folder = _numba_cache_dir()
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return  # no writable cache home: numba's default places apply
    os.environ["NUMBA_CACHE_DIR"] = folder


_use_keyed_numba_cache()


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
