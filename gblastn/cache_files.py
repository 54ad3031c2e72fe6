"""Files of gblastn's caches (compiled kernels, numba's runtime), written whole or not at all."""

import contextlib
import os


def write_cache_file(path: str, data: bytes) -> None:
    """Write `data` to `path` through a temporary file, so that a reader never sees part of
    it. A folder that cannot be written is left alone: a cache that cannot be kept only
    costs the next run a compilation."""
    partial = f"{path}.{os.getpid()}.part"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(partial, "wb") as out:
            out.write(data)
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(partial)
