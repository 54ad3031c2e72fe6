"""Every task's CPU stages compiled before the tests run searches: a search that finds its
task not yet compiled says so on stderr (compile_ahead), which the tests that compare stderr
with blastn's would see. The first-search path itself is tested with caches of its own
(test_compile_ahead)."""

import subprocess
import sys

import pytest


@pytest.fixture(scope="session", autouse=True)
def compiled_stages():
    for device in ("auto", "cpu"):  # a GPU's searches compile other CPU stages
        done = subprocess.run([sys.executable, "-m", "gblastn", "warmup", "-device", device],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
