#!/usr/bin/env python3
"""A new user's first searches: gblastn from an empty compiled-code cache, beside NCBI BLAST+,
in one run.

For each task: BLAST+'s first and second search, gblastn's first search from an empty cache
(everything the task uses compiled on the way), its second, and a third from a copy of the package elsewhere (a reinstall:
the cache is keyed by content, so nothing compiles again). The query list's files are
searched as one output, as the README's command does; outputs are compared line for line.

usage: coldstart.py [--db-fasta db/HS11286_chr_1-300000.fa] [--queries queries/queries.list]
                    [--tasks megablast,blastn] [--cpus 0-1] [--threads N] [--work DIR]
--cpus runs both tools on those CPUs only (taskset's list), to stand for a smaller machine.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def timed(cmd, env=None) -> tuple:
    """(seconds, stdout, stderr) of a command that must succeed."""
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr}")
    return seconds, done.stdout, done.stderr


def pinned(cmd: list, cpus: str | None) -> list:
    return ["taskset", "-c", cpus, *cmd] if cpus else cmd


def cpu_count(cpus: str | None) -> int:
    """The number of CPUs in a taskset list such as 0-1,4."""
    if not cpus:
        return os.cpu_count() or 1
    total = 0
    for part in cpus.split(","):
        first, _, last = part.partition("-")
        total += int(last or first) - int(first) + 1
    return total


def query_files(listing: str) -> list:
    folder = os.path.dirname(os.path.abspath(listing))
    with open(listing) as names:
        return [os.path.join(folder, line.strip()) for line in names if line.strip()]


def fresh_env(cache_home: str, package_parent: str | None = None) -> dict:
    """The environment of a user with an empty cache (and, given, the package found in
    another folder)."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("NUMBA_")}
    env["XDG_CACHE_HOME"] = cache_home
    if package_parent:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent,
                                                          env.get("PYTHONPATH")]))
    return env


def same_lines(a: str, b: str) -> str:
    rows = [line for line in a.splitlines() if not line.startswith("#")]
    other = [line for line in b.splitlines() if not line.startswith("#")]
    return "identical" if rows == other else f"DIFFERENT ({len(rows)} vs {len(other)} lines)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db-fasta", default=os.path.join(ROOT, "db", "HS11286_chr_1-300000.fa"))
    parser.add_argument("--queries", default=os.path.join(ROOT, "queries", "queries.list"))
    parser.add_argument("--tasks", default="megablast,blastn")
    parser.add_argument("--cpus", default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--work", default=None)
    args = parser.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="coldstart-")
    os.makedirs(work, exist_ok=True)
    threads = str(args.threads or cpu_count(args.cpus))
    queries = os.path.join(work, "queries.fa")
    with open(queries, "w") as joined:
        for path in query_files(args.queries):
            with open(path) as part:
                joined.write(part.read())
    timed(["makeblastdb", "-in", args.db_fasta, "-dbtype", "nucl", "-out",
           os.path.join(work, "blastdb")])
    gdb = os.path.join(work, "gdb")
    timed([sys.executable, "-m", "gblastn", "makedb", "-in", args.db_fasta, "-out", gdb,
           "-quiet"])
    elsewhere = os.path.join(work, "reinstalled")
    shutil.rmtree(elsewhere, ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "gblastn"), os.path.join(elsewhere, "gblastn"),
                    ignore=shutil.ignore_patterns("__pycache__"))

    print(f"cpus: {args.cpus or 'all'} ({cpu_count(args.cpus)}), threads: {threads}, "
          f"queries: {len(query_files(args.queries))} files")
    print("| task | blastn 1st | blastn 2nd | gblastn 1st (compiles) | gblastn 2nd | "
          "gblastn reinstalled | 1st / blastn 1st | 2nd / blastn 2nd | output |")
    print("|---|---|---|---|---|---|---|---|---|")
    for task in args.tasks.split(","):
        cache_home = os.path.join(work, f"cache-{task}")  # each task from an empty cache
        shutil.rmtree(cache_home, ignore_errors=True)
        blast = pinned(["blastn", "-task", task, "-db", os.path.join(work, "blastdb"),
                        "-query", queries, "-outfmt", "7", "-num_threads", threads], args.cpus)
        b1, blast_out, _ = timed(blast)
        b2, _, _ = timed(blast)
        ours = pinned([sys.executable, "-m", "gblastn", "search", "-task", task, "-db", gdb,
                       "-query_list", args.queries, "-outfmt", "7", "-device", "cpu",
                       "-num_threads", threads], args.cpus)
        g1, ours_out, notice = timed(ours, fresh_env(cache_home))
        g2, _, _ = timed(ours, fresh_env(cache_home))
        g3, _, _ = timed(ours, fresh_env(cache_home, elsewhere))
        said = "compiling" in notice
        print(f"| {task} | {b1:.2f} s | {b2:.2f} s | {g1:.1f} s{'' if said else ' (no notice!)'}"
              f" | {g2:.2f} s | {g3:.2f} s | {g1 / b1:.1f}x | {g2 / b2:.1f}x | "
              f"{same_lines(blast_out, ours_out)} |", flush=True)


if __name__ == "__main__":
    main()
