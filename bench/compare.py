#!/usr/bin/env python3
"""gblastn beside NCBI BLAST+ on the same database and query sets, in one run.

For each query set: both tools' wall times (median of --repeat rounds, start-up included; a
round runs blastn, then each gblastn mode, so that a host's drift weighs on both), the
ratio, peak memory, concordance (the share of BLAST+'s output lines gblastn reproduces
exactly, and the share of gblastn's lines BLAST+ also has), CPU seconds (user and system,
median) and gblastn's time per stage. With
--together the sets are searched as one FASTA, each tool invoked once; with --modes
pipeline,serial both gblastn drivers are timed, with the busy share of the GPU and of the CPU
threads.

With --scaling both tools also search each set on one thread (after the rounds), and the
speed-up from one thread to --threads is printed for each, with gblastn's extension stages'
(ungapped, gapped and traceback: the span from the first one's start to the last one's end,
and their summed thread-seconds, whose growth is time spent waiting).

usage: compare.py --db-fasta DB.fa --queries queries.list [--task megablast] [--threads 2]
                  [--device cpu|gpu] [--modes pipeline] [--together] [--repeat 1]
                  [--work DIR] [--cold] [--diff N] [--warm-up] [--scaling]
The query list names FASTA files (one query set each), as the benchmark kit's kleb.py writes it.
"""

import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

COLUMNS = "6 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore score sstrand"
CPU_STAGES = ("query setup", "ungapped", "gapped", "traceback", "output")
EXTENSION_STAGES = ("ungapped", "gapped", "traceback")


def compile_bytecode():
    """Write the bytecode of every package a search imports, as pip does when it installs
    them (gblastn.compile_ahead.write_bytecode). Where packages were installed without it
    and PYTHONDONTWRITEBYTECODE is set (as on some GPU hosts), each run would otherwise
    compile numpy's sources again (about 0.7 s of an 8G search on an H200 host)."""
    from gblastn.compile_ahead import write_bytecode

    write_bytecode()
    print("bytecode of the packages a search imports written")


def run_measured(cmd, env=None, cwd=None):
    """Run a command; return (seconds, its own resource use via wait4, stdout lines, stderr,
    its wait status)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return seconds, usage, out.read().decode().splitlines(), err.read().decode(), status


ChildRun = collections.namedtuple("ChildRun", "seconds rss_mib lines stderr cpu_seconds")


def run_child(cmd, env=None) -> ChildRun:
    """Run a command: its wall seconds, its own peak RSS in MiB and CPU seconds (user and
    system, via wait4), its stdout lines and its stderr."""
    seconds, usage, lines, errors, status = run_measured(cmd, env)
    if status:
        sys.exit(f"failed: {' '.join(cmd)}\n{errors[-2000:]}")
    return ChildRun(seconds, usage.ru_maxrss / 1024, lines, errors,
                    usage.ru_utime + usage.ru_stime)


def concordance(blast_lines, our_lines):
    blast, ours = collections.Counter(blast_lines), collections.Counter(our_lines)
    common = sum((blast & ours).values())
    return common / max(1, len(blast_lines)), common / max(1, len(our_lines))


def stage_times(stderr: str) -> tuple[dict, str]:
    """The '-stage_times' line gblastn prints: ({stage: seconds}, when each stage was busy)."""
    match = re.search(r"stage times \(summed over threads, [\d.]+s\): (.*)", stderr)
    if not match:
        return {}, ""
    summed, _, spans = match.group(1).partition("; busy between: ")
    parts = (part.rsplit(" ", 1) for part in summed.split(", "))
    return {name.strip(): float(secs.rstrip("s")) for name, secs in parts}, spans


def extension_span(stderr: str) -> tuple[float, float]:
    """(the extension stages' span, their summed thread-seconds) from '-stage_times'."""
    times, spans = stage_times(stderr)
    windows = [(float(start), float(end)) for name, start, end in
               re.findall(r"([a-z ]+?) ([\d.]+)-([\d.]+)s", spans)
               if name.strip() in EXTENSION_STAGES]
    if not windows:
        return 0.0, 0.0
    span = max(end for _, end in windows) - min(start for start, _ in windows)
    return span, sum(times.get(name, 0.0) for name in EXTENSION_STAGES)


def with_threads(cmd: list, threads: int) -> list:
    """The command with -num_threads set to `threads`."""
    at = cmd.index("-num_threads") + 1
    return [*cmd[:at], str(threads), *cmd[at + 1:]]


def print_scaling(a, blast_cmd, our_cmd, blast_seconds, our_seconds, our_stderr) -> None:
    """Each tool's speed-up from one thread to a.threads (its median there against one run on
    one thread), and gblastn's extension stages'."""
    blast_one = run_child(with_threads(blast_cmd, 1)).seconds
    our_run = run_child(with_threads(our_cmd, 1))
    our_one = our_run.seconds
    span_one, busy_one = extension_span(our_run.stderr)
    span, busy = extension_span(our_stderr)
    print(f"{'':<12}  from 1 to {a.threads} threads: blastn {blast_one:.2f} -> "
          f"{blast_seconds:.2f} s ({blast_one / blast_seconds:.1f}x), gblastn {our_one:.2f} -> "
          f"{our_seconds:.2f} s ({our_one / our_seconds:.1f}x); gblastn's extension stages "
          f"{span_one:.2f} -> {span:.2f} s ({span_one / max(span, 1e-9):.1f}x), "
          f"{busy_one:.2f} -> {busy:.2f} thread-s")


def work_done(stderr: str) -> dict:
    """The 'work done' line of '-stage_times': {tally: amount}."""
    match = re.search(r"^work done: (.*)$", stderr, re.MULTILINE)
    if not match:
        return {}
    parts = (part.rsplit(" ", 1) for part in match.group(1).split(", "))
    return {name: int(amount) for name, amount in parts}


def device_rates(times: dict, tallies: dict) -> str:
    """The GPU kernels' rates: ungapped extensions per second the device was held for them,
    DP cells per second of the DP kernel (GCUPS, which runs on a stream of its own), with
    the counts."""
    rates = []
    extensions, held = tallies.get("gpu ungapped extensions"), times.get("gpu ungapped")
    if extensions and held:
        rates.append(f"{extensions:,} ungapped extensions in {held:.2f} s "
                     f"({extensions / held / 1e6:.0f} M/s)")
    hits, cells, held = (tallies.get("gpu dp extensions"), tallies.get("gpu dp cells"),
                         times.get("gpu dp kernel"))
    if hits and cells and held:
        rates.append(f"{hits:,} DP extensions, {cells:,} cells in {held:.2f} s "
                     f"({cells / held / 1e9:.2f} GCUPS)")
    return "; ".join(rates)


def build_databases(a, work, while_blast_builds=None):
    """Both tools' databases; makeblastdb runs in the background meanwhile gblastn's database
    is built and `while_blast_builds(our_db)` runs (the numba warm-up), since neither is
    timed."""
    blast_db, our_db = os.path.join(work, "blastdb"), os.path.join(work, "gblastndb")
    blast_build = None
    if not os.path.exists(blast_db + ".nin") and not os.path.exists(blast_db + ".nal"):
        blast_build = Background(run_child, ["makeblastdb", "-in", a.db_fasta, "-dbtype",
                                             "nucl", "-out", blast_db])
    if not os.path.exists(our_db + ".gdb"):
        made = run_child([sys.executable, "-m", "gblastn", "makedb", "-in", a.db_fasta, "-out",
                          our_db, "-quiet"])
        print(f"gblastn makedb {made.seconds:.1f} s, {made.rss_mib:.0f} MiB")
    if while_blast_builds:
        while_blast_builds(our_db)
    if blast_build:
        made = blast_build.result()
        print(f"makeblastdb {made.seconds:.1f} s, {made.rss_mib:.0f} MiB (beside the above)")
    return blast_db, our_db


class Background:
    """function(*args) in a thread; result() waits for it (and re-raises its error)."""

    def __init__(self, function, *args):
        import threading
        self.value, self.error = None, None

        def body():
            try:
                self.value = function(*args)
            except BaseException as exc:  # noqa: BLE001 - re-raised by result()
                self.error = exc
        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()

    def result(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.value


def query_sets(a, work):
    folder = os.path.dirname(os.path.abspath(a.queries))
    paths = [os.path.join(folder, line.strip()) for line in open(a.queries) if line.strip()]
    if not a.together:
        return [(os.path.splitext(os.path.basename(p))[0], p) for p in paths]
    together = os.path.join(work, "all_queries.fa")
    with open(together, "wb") as out:
        for path in paths:
            with open(path, "rb") as handle:
                shutil.copyfileobj(handle, out)
    return [("all sets", together)]


def _rounds(a, blast_cmd, our_cmds: dict):
    """a.repeat rounds, each running blastn and then every gblastn command once, so that a
    host whose speed drifts over minutes (blastn's own time moved by 16 % between two runs
    on one GPU host) weighs on both sides alike. Returns blastn's runs and each mode's."""
    blast_runs, runs_of_mode = [], {mode: [] for mode in our_cmds}
    for _ in range(a.repeat):
        blast_runs.append(run_child(blast_cmd))
        for mode, cmd in our_cmds.items():
            env = dict(os.environ)
            cache = None
            if a.cold:
                cache = tempfile.mkdtemp(prefix="numba-cold-")
                env["NUMBA_CACHE_DIR"] = cache
            runs_of_mode[mode].append(run_child(cmd, env))
            if cache:
                shutil.rmtree(cache, ignore_errors=True)
    return blast_runs, runs_of_mode


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db-fasta", required=True)
    ap.add_argument("--queries", required=True, help="file listing query FASTA files")
    ap.add_argument("--task", default="megablast")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--modes", default="pipeline", help="gblastn drivers to time: pipeline,serial")
    ap.add_argument("--together", action="store_true", help="search all sets as one FASTA")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--work", default=None, help="folder for the databases (default: a temp dir)")
    ap.add_argument("--cold", action="store_true", help="empty numba's cache before each gblastn run")
    ap.add_argument("--diff", type=int, default=0, help="print up to N differing lines per set")
    ap.add_argument("--scaling", action="store_true",
                    help="also search on one thread: each tool's speed-up to --threads")
    ap.add_argument("--warm-up", action="store_true",
                    help="run each gblastn command once untimed first, while makeblastdb runs "
                         "(fills numba's cache), after writing the bytecode of what a search "
                         "imports")
    a = ap.parse_args()

    work = a.work or tempfile.mkdtemp(prefix="gblastn-bench-")
    os.makedirs(work, exist_ok=True)
    modes = a.modes.split(",")
    sets = query_sets(a, work)

    def our_command(our_db, path, mode):
        return [sys.executable, "-m", "gblastn", "search", "-task", a.task, "-db", our_db,
                "-query", path, "-outfmt", COLUMNS, "-num_threads", str(a.threads),
                "-device", a.device, "-mode", mode, "-stage_times"]

    def warm_up(our_db):
        if a.warm_up and not a.cold:
            compile_bytecode()
            for name, path in sets:
                for mode in modes:
                    seconds = run_child(our_command(our_db, path, mode))[0]
                    print(f"warm-up {name}, {mode} (untimed): {seconds:.2f} s")

    blast_db, our_db = build_databases(a, work, warm_up)
    print(f"task {a.task}, {a.threads} threads each, gblastn device {a.device}, "
          f"median of {a.repeat}{', cold numba cache' if a.cold else ''}")
    print(f"{'query set':<12}{'mode':<10}{'blastn s':>9}{'gblastn s':>10}{'speed-up':>9}"
          f"{'blast MiB':>10}{'ours MiB':>9}{'blast lines':>12}{'ours lines':>11}"
          f"{'of BLAST':>9}{'of ours':>8}{'blast CPU s':>12}{'ours CPU s':>11}")
    for name, path in sets:
        blast_cmd = ["blastn", "-task", a.task, "-db", blast_db, "-query", path, "-outfmt", COLUMNS,
                     "-num_threads", str(a.threads)]
        blast_runs, runs_of_mode = _rounds(a, blast_cmd, {
            mode: our_command(our_db, path, mode) for mode in modes})
        bt = statistics.median(r[0] for r in blast_runs)
        blast_lines = blast_runs[-1][2]
        for mode in modes:
            our_runs = runs_of_mode[mode]
            ot = statistics.median(r[0] for r in our_runs)
            our_lines = our_runs[-1][2]
            of_blast, of_ours = concordance(blast_lines, our_lines)
            print(f"{name:<12}{mode:<10}{bt:>9.2f}{ot:>10.2f}{bt / ot:>8.2f}x"
                  f"{max(r[1] for r in blast_runs):>10.0f}{max(r[1] for r in our_runs):>9.0f}"
                  f"{len(blast_lines):>12}{len(our_lines):>11}{100 * of_blast:>8.2f}%"
                  f"{100 * of_ours:>7.2f}%"
                  f"{statistics.median(r.cpu_seconds for r in blast_runs):>12.2f}"
                  f"{statistics.median(r.cpu_seconds for r in our_runs):>11.2f}")
            times, spans = stage_times(our_runs[-1][3])
            if times:
                split = ", ".join(f"{k} {v:.2f}" for k, v in times.items())
                cpu_busy = sum(times.get(k, 0.0) for k in CPU_STAGES) / (a.threads * ot)
                scan_busy = times.get("scan", 0.0) / ot
                print(f"{'':<12}  gblastn stages (s, summed over threads): {split}")
                print(f"{'':<12}  busy between (s from start): {spans}")
                print(f"{'':<12}  busy: scan ({a.device}) {100 * scan_busy:.0f}% of the wall time,"
                      f" CPU threads {100 * cpu_busy:.0f}%")
            rates = device_rates(times, work_done(our_runs[-1][3]))
            if rates:
                print(f"{'':<12}  device: {rates}")
            if a.scaling:
                print_scaling(a, blast_cmd, our_command(our_db, path, mode), bt, ot,
                              our_runs[-1][3])
            if a.diff:
                ours_set, blast_set = set(our_lines), set(blast_lines)
                for line in [x for x in blast_lines if x not in ours_set][:a.diff]:
                    print("   blast only: " + line)
                for line in [x for x in our_lines if x not in blast_set][:a.diff]:
                    print("   ours only:  " + line)


if __name__ == "__main__":
    main()
