"""The process heap's handling of large blocks, set by every search (drivers.Search).

glibc serves a block of at least its mmap threshold with a mapping of its own, returned to
the system when freed, but it raises that threshold to the size of each such block freed:
after the first slices' seeds and the first lookup tables are freed, later ones come from
the threads' heaps, whose freed space is kept and fragments, and a search holds far more
than it uses (docs/perf/blastn-gpu-extensions.md). A fixed threshold keeps large
blocks mapped and returned.
"""

import ctypes
import functools

M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)
LARGE_BLOCK = 1 << 20


@functools.cache
def return_large_blocks() -> bool:
    """Fix the mmap threshold at LARGE_BLOCK bytes (a block that large is mapped and given
    back when freed). False where the C library has no mallopt (not glibc). Once a process
    (a cluster worker makes a search of each of its tasks): the setting holds. mallopt is
    looked up among the symbols the process has loaded, the C library's among them: by
    name, the library is found by running `ldconfig -p`."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK) == 1
