"""Every task's CPU stages compiled before the tests run searches: a search that finds its
task not yet compiled says so on stderr (compile_ahead), which the tests that compare stderr
with blastn's would see. The first-search path itself is tested with caches of its own
(test_compile_ahead)."""

import fcntl
import os
import subprocess
import sys
import tempfile

import pytest

# the tests come in three folders (unit: each stage and the command line; golden: against
# NCBI BLAST+; gpu: the kernels and the GPU backend), which share helper modules (golden.py,
# reliability.py, report_golden.py here) and some of each other's cases
TESTS = os.path.dirname(os.path.abspath(__file__))
for folder in ("unit", "golden", "gpu", ""):
    if os.path.join(TESTS, folder) not in sys.path:
        sys.path.insert(0, os.path.join(TESTS, folder))


@pytest.fixture(scope="session", autouse=True)
def compiled_stages():
    # one warm-up at a time (pytest-xdist's workers each run this): numba's cache index is
    # rewritten by each process that saves to it, so processes compiling the same
    # functions at once can drop each other's entries, and a later search compiles again
    with open(os.path.join(tempfile.gettempdir(), "gblastn-tests-warmup.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for device in ("auto", "cpu"):  # a GPU's searches compile other CPU stages
            done = subprocess.run([sys.executable, "-m", "gblastn", "warmup", "-device",
                                   device], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr


@pytest.fixture(scope="session", autouse=True)
def api_searches_leave_bundles_alone():
    """The tests look into numba's dispatchers (their signatures, what they compiled): the
    Python API's searches in this process leave the machine-code bundles alone, which
    would take the dispatchers' calls for the rest of the session. test_machine_code tests
    the API's bundles in processes of their own."""
    from gblastn import compile_ahead

    real = compile_ahead.load_first_bundle
    compile_ahead.load_first_bundle = lambda task, device: False
    yield
    compile_ahead.load_first_bundle = real

