#!/usr/bin/env python3
"""Build one FASTA file with makeblastdb and with gblastn makedb, side by side.

usage: python3 bench/makedb.py FASTA [--reps N] [--workdir DIR]
Prints each tool's wall time (median of the repetitions), the ratio and each tool's peak
memory (maxrss of the child process, from wait4's rusage).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_measured(command: list[str], env=None) -> tuple[float, int]:
    """(wall seconds, peak resident KiB) of one child process."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}\n{proc.stderr.read().decode()}")
    return elapsed, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fasta")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    if shutil.which("makeblastdb") is None:
        sys.exit("makeblastdb is not on the PATH")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="makedb-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    tools = {
        "makeblastdb": ["makeblastdb", "-in", args.fasta, "-dbtype", "nucl", "-out", str(workdir / "blast")],
        "gblastn makedb": [sys.executable, "-m", "gblastn", "makedb", "-in", args.fasta, "-out",
                           str(workdir / "gblastn"), "-quiet"],
    }
    results = {name: [] for name in tools}
    for _ in range(args.reps):  # alternate the tools
        for name, command in tools.items():
            results[name].append(run_measured(command, env))
    size = os.path.getsize(args.fasta)
    print(f"input: {args.fasta} ({size / 1e6:,.1f} MB), {args.reps} repetition(s), median times")
    medians = {}
    for name, runs in results.items():
        medians[name] = statistics.median(t for t, _ in runs)
        peak = max(m for _, m in runs)
        print(f"{name:>15}: {medians[name]:8.2f} s   peak RSS {peak / 1024:8.1f} MiB")
    ratio = medians["gblastn makedb"] / medians["makeblastdb"]
    print(f"{'ratio':>15}: gblastn / makeblastdb = {ratio:.2f}")
    shutil.rmtree(workdir, ignore_errors=True) if args.workdir is None else None


if __name__ == "__main__":
    main()
