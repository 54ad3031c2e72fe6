"""Helpers for the reliability tests: a small world (a database built by `gblastn makedb`
from a FASTA file written here, with makeblastdb's database of the same name beside it when
NCBI BLAST+ is installed, and query files), and runners for both command lines."""

import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

from golden import mutate, random_dna, write_fasta

HAS_BLAST = shutil.which("blastn") is not None and shutil.which("makeblastdb") is not None
SEARCH_SECONDS = 300  # a search of the small world takes about a second once compiled


class World:
    """A database named `db` (gblastn's db.gdb/, and blastn's db.n* when BLAST+ is
    installed) in `folder`, and query files: `query` (hits every subject), `fragments`
    (short records), with `sequences` holding the letters they are cut from."""

    def __init__(self, folder):
        self.folder = folder
        rng = np.random.default_rng(33)
        base = random_dna(rng, 12_000)
        subjects = [("s1 first subject", base[:6000]),
                    ("s2 mutated copy", mutate(rng, base[2000:9000], 0.02)),
                    ("s3 other", random_dna(rng, 3000))]
        fasta = write_fasta(folder / "subjects.fa", subjects)
        self.db = str(folder / "db")
        done = gblastn("makedb", "-in", fasta, "-out", self.db, "-quiet")
        assert done.returncode == 0, done.stderr
        if HAS_BLAST:
            subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-out", self.db],
                           check=True, capture_output=True)
        self.sequences = {"long": base[500:3500].tobytes().decode(),
                          "short": base[4000:4300].tobytes().decode()}
        self.query = write_fasta(folder / "query.fa",
                                 [("qlong a long query", base[500:3500]),
                                  ("qshort", base[4000:4300])])


def gblastn(*args, stdin=None, umask=None, text=True, env_extra=None,
            timeout=SEARCH_SECONDS) -> subprocess.CompletedProcess:
    """`python -m gblastn ARGS` (the checkout's package), its output captured; `env_extra`
    adds to its environment."""
    return subprocess.run([sys.executable, "-m", "gblastn", *args], input=stdin,
                          capture_output=True, text=text, timeout=timeout,
                          env={**_environment(), **(env_extra or {})},
                          umask=-1 if umask is None else umask)


def search(world, *args, **kwargs) -> subprocess.CompletedProcess:
    return gblastn("search", "-db", world.db, "-device", "cpu", *args, **kwargs)


def start_search(world, *args, **kwargs) -> subprocess.Popen:
    """A search left running, its stdin a pipe (written or not by the caller)."""
    return subprocess.Popen([sys.executable, "-m", "gblastn", "search", "-db", world.db,
                             "-device", "cpu", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_environment(), **kwargs)


def blastn(world, *args, stdin=None, text=True) -> subprocess.CompletedProcess:
    return subprocess.run(["blastn", "-db", world.db, *args], input=stdin,
                          capture_output=True, text=text, timeout=SEARCH_SECONDS)


def _environment() -> dict:
    """This checkout's package first on the path, whatever is installed."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def assert_one_line_error(done, code: int) -> str:
    """The run failed with `code` and said so in one `gblastn: error:` line; returns it."""
    assert done.returncode == code, (done.returncode, done.stderr)
    stderr = done.stderr if isinstance(done.stderr, str) else done.stderr.decode(errors="replace")
    errors = [line for line in stderr.splitlines() if line.startswith("gblastn: error:")]
    assert len(errors) == 1, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    return errors[0]


def temporaries(folder) -> list:
    return sorted(name for name in os.listdir(folder) if name.startswith(".gblastn-"))


def wait_for(condition, seconds: float = 120, what: str = "the condition") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def mount_tmpfs(folder, size: str, read_only: bool = False) -> bool:
    """Mount a small tmpfs on `folder` (True), or False where this process may not."""
    options = f"size={size}" + (",ro" if read_only else "")
    if shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                          capture_output=True)
    return done.returncode == 0


def unmount(folder) -> None:
    subprocess.run(["umount", str(folder)], capture_output=True)


def sigint_by_default():
    """A child's SIGINT as a terminal's Ctrl-C finds it (a Popen preexec_fn). A test run
    started in the background (`pytest &`) ignores SIGINT, its children inherit that, and
    Python keeps an inherited SIG_IGN: a child the test interrupts would rightly go on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
