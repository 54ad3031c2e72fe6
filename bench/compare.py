#!/usr/bin/env python3
"""gblastn beside NCBI BLAST+ on the same database and query sets, in one run.

For each query set: both tools' wall times (median of --repeat runs, start-up included), the
ratio, peak memory, and concordance: the share of BLAST+'s output lines gblastn reproduces
exactly, and the share of gblastn's lines BLAST+ also has.

usage: compare.py --db-fasta DB.fa --queries queries.list [--task megablast] [--threads 2]
                  [--device cpu|gpu] [--repeat 1] [--work DIR] [--cold]
The query list names FASTA files (one query set each), as ../shared/bench/kleb.py writes it.
"""

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

COLUMNS = "6 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore score sstrand"


def run_child(cmd, env=None):
    """Run a command; return (seconds, its own peak RSS in MiB via wait4, stdout lines)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if status:
            sys.exit(f"failed: {' '.join(cmd)}\n{err.read().decode()[-2000:]}")
        return seconds, usage.ru_maxrss / 1024, out.read().decode().splitlines()


def concordance(blast_lines, our_lines):
    blast, ours = collections.Counter(blast_lines), collections.Counter(our_lines)
    common = sum((blast & ours).values())
    return (common / max(1, len(blast_lines)), common / max(1, len(our_lines)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db-fasta", required=True)
    ap.add_argument("--queries", required=True, help="file listing query FASTA files")
    ap.add_argument("--task", default="megablast")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--work", default=None, help="folder for the databases (default: a temp dir)")
    ap.add_argument("--cold", action="store_true", help="empty numba's cache before each gblastn run")
    ap.add_argument("--diff", type=int, default=0, help="print up to N differing lines per set")
    a = ap.parse_args()

    work = a.work or tempfile.mkdtemp(prefix="gblastn-bench-")
    os.makedirs(work, exist_ok=True)
    blast_db, our_db = os.path.join(work, "blastdb"), os.path.join(work, "gblastndb")
    if not os.path.exists(blast_db + ".nin") and not os.path.exists(blast_db + ".nal"):
        subprocess.run(["makeblastdb", "-in", a.db_fasta, "-dbtype", "nucl", "-out", blast_db],
                       check=True, capture_output=True)
    if not os.path.exists(our_db):
        subprocess.run([sys.executable, "-m", "gblastn", "makedb", "-in", a.db_fasta, "-out", our_db,
                        "-quiet"], check=True)

    folder = os.path.dirname(os.path.abspath(a.queries))
    sets = [os.path.join(folder, line.strip()) for line in open(a.queries) if line.strip()]
    print(f"task {a.task}, {a.threads} threads, gblastn device {a.device}, "
          f"median of {a.repeat}{', cold numba cache' if a.cold else ''}")
    header = (f"{'query set':<14}{'blastn s':>9}{'gblastn s':>10}{'ratio':>7}{'blast MiB':>10}"
              f"{'ours MiB':>9}{'blast lines':>12}{'ours lines':>11}{'of BLAST':>9}{'of ours':>8}")
    print(header)
    for path in sets:
        name = os.path.splitext(os.path.basename(path))[0]
        blast_cmd = ["blastn", "-task", a.task, "-db", blast_db, "-query", path, "-outfmt", COLUMNS,
                     "-num_threads", str(a.threads)]
        our_cmd = [sys.executable, "-m", "gblastn", "search", "-task", a.task, "-db", our_db,
                   "-query", path, "-outfmt", COLUMNS, "-num_threads", str(a.threads),
                   "-device", a.device]
        blast_runs, our_runs = [], []
        for _ in range(a.repeat):
            blast_runs.append(run_child(blast_cmd))
            env = dict(os.environ)
            if a.cold:
                cache = tempfile.mkdtemp(prefix="numba-cold-")
                env["NUMBA_CACHE_DIR"] = cache
            our_runs.append(run_child(our_cmd, env))
            if a.cold:
                shutil.rmtree(cache, ignore_errors=True)
        bt = statistics.median(r[0] for r in blast_runs)
        ot = statistics.median(r[0] for r in our_runs)
        blast_lines, our_lines = blast_runs[-1][2], our_runs[-1][2]
        of_blast, of_ours = concordance(blast_lines, our_lines)
        print(f"{name:<14}{bt:>9.2f}{ot:>10.2f}{ot / bt:>7.2f}{max(r[1] for r in blast_runs):>10.0f}"
              f"{max(r[1] for r in our_runs):>9.0f}{len(blast_lines):>12}{len(our_lines):>11}"
              f"{100 * of_blast:>8.2f}%{100 * of_ours:>7.2f}%")
        if a.diff:
            ours_set, blast_set = set(our_lines), set(blast_lines)
            for line in [x for x in blast_lines if x not in ours_set][:a.diff]:
                print("   blast only: " + line)
            for line in [x for x in our_lines if x not in blast_set][:a.diff]:
                print("   ours only:  " + line)


if __name__ == "__main__":
    main()
