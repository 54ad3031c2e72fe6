#!/usr/bin/env python3
"""gblastn on several GPUs of one host (Dask) against gblastn on one GPU, in one run.

After one untimed search, every run is a whole `gblastn search` of the throughput query
set, timed end to end (the process's start, a local cluster's start and the database's load
included):
* one GPU, one process: the reference;
* for each worker count N of --gpus and each mode of --modes, a local cluster of N workers
  made for the search (`-local_workers N -cluster_mode MODE`; replicate sends whole query
  batches to workers that each hold the database, several at once: blastn sizes a batch
  from the extensions of the one before, so the later ones are forecast and formed again
  when a count proves them wrong; shard splits the database);
* a served cluster of each N of --served (`gblastn serve -gpus N`; the largest of --gpus by
  default): one search sent first (its workers load their share, compile and copy), then
  the throughput set timed; with --latency-queries, on the largest, that smaller set
  --repeat times, end to end: the resident search;
* with --capped-memory SIZE, a local cluster of the largest N in auto mode whose GPUs may
  hold SIZE of volumes (GBLASTN_GPU_MEMORY, forced below the database): the split it chose,
  and its output on the latency set against a one-process search on the CPU.
Each output is compared with the one-process search's of the same set. Prints a table, then
the figures the scale-out targets ask for: the throughput of N GPUs against one, whether the
outputs are identical, and the resident search's end-to-end time.

usage: scaleout.py --db NAME --queries Q.fa [--latency-queries Q220.fa] [--gpus 2,4]
                   [--modes replicate,shard] [--served 1,2] [--task megablast] [--threads T] [--repeat 3]
                   [--capped-memory 1500MB] [--device gpu|cpu] [--work DIR] [--tasks]
--device cpu makes the same runs with CPU workers (the bench's own check on a host without
GPUs). Needs gblastn with the dask extra.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

COLUMNS = "6 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore score"
READY_SECONDS = 600


class Bench:
    """The runs' common settings, and where they write."""

    def __init__(self, args):
        self.args = args
        self.folder = args.work or tempfile.mkdtemp(prefix="gblastn-scaleout-")
        os.makedirs(self.folder, exist_ok=True)
        self.unit = "GPU" if args.device == "gpu" else "CPU worker"

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def search(self, query: str, out: str, *extra: str, env=None) -> tuple:
        """One `gblastn search` of `query` into `out`: (seconds, its stderr). Each is told
        on stderr as it ends, so that a bench cut short still shows its runs."""
        args = self.args
        took, stderr = gblastn("search", "-task", args.task, "-db", args.db, "-query", query,
                               "-outfmt", COLUMNS, "-num_threads", str(args.threads), "-out",
                               out, *extra, env=env)
        print(f"scaleout.py: {took:.2f} s: search {os.path.basename(query)} "
              f"{' '.join(extra)}", file=sys.stderr, flush=True)
        return took, stderr

    def one_process(self, query: str, out: str, device: str | None = None) -> float:
        return self.search(query, out, "-device", device or self.args.device)[0]

    def label(self, workers: int) -> str:
        return f"{workers} {self.unit}{'s' if workers != 1 else ''}"


def gblastn(*args: str, env=None) -> tuple:
    """Run gblastn: (wall seconds, stderr); exits with its stderr if it fails."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gblastn", *args], capture_output=True,
                          text=True, env=env)
    took = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"scaleout.py: gblastn {' '.join(args)} failed:\n{done.stderr}")
    return took, done.stderr


class Served:
    """`gblastn serve` with N workers until the block ends; its messages go to a log file
    (a pipe left unread would stall it)."""

    def __init__(self, bench: Bench, workers: int):
        args = bench.args
        self.file = bench.path(f"scheduler-{workers}.json")
        self.log = open(bench.path(f"serve-{workers}.log"), "w+")
        count = ["-gpus", str(workers)] if args.device == "gpu" else ["-workers", str(workers)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gblastn", "serve", "-db", args.db, *count, "-device",
             args.device, "-num_threads", str(args.threads), "-scheduler_file", self.file],
            stderr=self.log, text=True)

    def __enter__(self):
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline and self.process.poll() is None:
            self.log.seek(0)
            if "gblastn: serving" in self.log.read():
                return self
            time.sleep(0.2)
        self.__exit__()
        sys.exit(f"scaleout.py: gblastn serve did not start (see {self.log.name})")

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=READY_SECONDS)
        self.log.close()


class TaskStream:
    """With --tasks, the Dask tasks that a served search ran (the scheduler's task stream,
    all clients'), written to a TSV (worker, task kind, batch, start, stop: seconds from the
    first start; a task that left its worker's slot counts to its end) and summed per
    worker: whether the workers' time goes to the batches' preliminary searches, one after
    another in the task slot, or to their tracebacks beside them."""

    def __init__(self, scheduler_file: str, wanted: bool):
        self.scheduler_file, self.wanted, self.tasks = scheduler_file, wanted, []

    def __enter__(self):
        if self.wanted:
            import distributed

            self.client = distributed.Client(scheduler_file=self.scheduler_file,
                                             set_as_default=False)
            self.stream = distributed.get_task_stream(client=self.client)
            self.stream.__enter__()
        return self

    def __exit__(self, *exc):
        if self.wanted:
            self.stream.__exit__(*exc)
            self.tasks = self.stream.data
            self.client.close()

    def report(self, path: str) -> None:
        if not self.wanted:
            return
        rows = []
        for task in self.tasks:
            found = re.match(r"gblastn-(\w+)-\w+-(\d+)", str(task["key"]))
            spans = [s for s in task["startstops"] if s["action"] == "compute"]
            if found and spans:
                rows.append((task["worker"], found.group(1), int(found.group(2)),
                             spans[0]["start"], spans[-1]["stop"]))
        if not rows:
            return
        origin = min(row[3] for row in rows)
        with open(path, "w") as out:
            for worker, kind, batch, start, stop in sorted(rows, key=lambda row: row[3]):
                out.write(f"{worker}\t{kind}\t{batch}\t{start - origin:.3f}\t"
                          f"{stop - origin:.3f}\n")
        for worker in sorted({row[0] for row in rows}):
            mine = [row for row in rows if row[0] == worker]
            kinds = {}
            for _, kind, _, start, stop in mine:
                count, seconds = kinds.get(kind, (0, 0.0))
                kinds[kind] = (count + 1, seconds + stop - start)
            span = max(row[4] for row in mine) - min(row[3] for row in mine)
            print(f"scaleout.py: tasks on {worker}: {span:.2f} s from first to last; " +
                  ", ".join(f"{kind} {count} ({seconds:.2f} s)"
                            for kind, (count, seconds) in sorted(kinds.items())),
                  file=sys.stderr, flush=True)


def same(a: str, b: str) -> bool:
    with open(a, "rb") as one, open(b, "rb") as other:
        return one.read() == other.read()


def cluster_split(stderr: str) -> str:
    """How a cluster split the search, from its -stage_times line."""
    found = re.search(r"; cluster: ([^;\n]*)", stderr)
    return found.group(1).strip() if found else "unknown"


def local_runs(bench: Bench, single: str, reference: float) -> list:
    """The one-shot local clusters: (name, seconds, throughput ratio, identical)."""
    args = bench.args
    rows = []
    for workers in args.gpu_counts:
        for mode in filter(None, args.modes.split(",")):
            out = bench.path(f"local-{workers}-{mode}.out")
            took, _ = bench.search(args.queries, out, "-device", args.device,
                                   "-local_workers", str(workers), "-cluster_mode", mode)
            rows.append((f"{bench.label(workers)}, local cluster, {mode}", took,
                         reference / took, same(single, out)))
    return rows


def served_runs(bench: Bench, single: str, reference: float) -> tuple:
    """A served cluster of each size of --served: its throughput row (the second search of
    the throughput set: the first loads the workers' share); with --latency-queries the
    largest one's latency (workers, the seconds of each repeat, identical)."""
    args = bench.args
    rows, latency = [], None
    for workers in args.served_counts:
        with Served(bench, workers) as served:
            sent = ["-scheduler_file", served.file]
            out = bench.path(f"served-{workers}.out")
            bench.search(args.queries, out, *sent)
            with TaskStream(served.file, args.tasks) as stream:
                took, stderr = bench.search(args.queries, out, *sent, "-stage_times")
            stream.report(bench.path(f"tasks-served-{workers}.tsv"))
            rows.append((f"{bench.label(workers)}, served cluster", took, reference / took,
                         same(single, out)))
            print(f"scaleout.py: served {workers}: {cluster_notes(stderr)}", file=sys.stderr,
                  flush=True)
            if args.latency_queries and workers == max(args.served_counts):
                small = bench.path("latency-served.out")
                times = [bench.search(args.latency_queries, small, *sent)[0]
                         for _ in range(args.repeat)]
                latency = (workers, times, same(bench.path("latency-single.out"), small))
    return rows, latency


def cluster_notes(stderr: str) -> str:
    """A cluster search's split, batches and workers' shares, from its -stage_times line."""
    return "; ".join(re.findall(r"(?:cluster|batches|workers): [^;\n]*", stderr))


def capped_run(bench: Bench) -> tuple:
    """The auto-mode cluster with its GPUs' memory capped: (split, seconds, CPU seconds,
    identical to the CPU's one-process search)."""
    args = bench.args
    cpu_out, out = bench.path("capped-cpu.out"), bench.path("capped-cluster.out")
    cpu_seconds = bench.one_process(args.latency_queries, cpu_out, "cpu")
    env = dict(os.environ, GBLASTN_GPU_MEMORY=args.capped_memory)
    took, stderr = bench.search(args.latency_queries, out, "-device", args.device,
                                "-local_workers", str(max(args.gpu_counts)), "-stage_times",
                                env=env)
    return cluster_split(stderr), took, cpu_seconds, same(cpu_out, out)


def report(bench: Bench, rows: list, latency, latency_single, capped) -> None:
    args = bench.args
    print(f"{'run':<42} {'seconds':>8} {'throughput':>11}  output")
    for name, took, ratio, identical in rows:
        verdict = {None: "reference", True: "identical", False: "DIFFERENT"}[identical]
        print(f"{name:<42} {took:>8.2f} {ratio:>10.2f}x  {verdict}")
    if latency:
        workers, times, identical = latency
        print(f"latency set {os.path.basename(args.latency_queries)}: one process "
              f"{latency_single:.2f} s; the served {bench.label(workers)} "
              f"{min(times):.2f} s end to end (best of {len(times)}: "
              f"{' '.join(f'{t:.2f}' for t in times)}), output "
              f"{'identical' if identical else 'DIFFERENT'}")
    if capped:
        split, took, cpu_seconds, identical = capped
        print(f"GPU memory capped to {args.capped_memory} (GBLASTN_GPU_MEMORY, forced): "
              f"{bench.label(max(args.gpu_counts))} in auto mode: {split}; {took:.2f} s; "
              f"output {'identical to' if identical else 'DIFFERENT from'} the one-process "
              f"CPU search ({cpu_seconds:.2f} s)")
    best = max(rows[1:], key=lambda row: row[2])
    every = all(row[3] is not False for row in rows) and (not latency or latency[2]) and \
        (not capped or capped[3])
    print(f"targets: throughput {best[0]} against 1 {bench.unit}: {best[2]:.2f}x; "
          f"identical output: {'yes' if every else 'NO'}" +
          (f"; resident search end to end: {min(latency[1]):.2f} s" if latency else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--queries", required=True, help="the throughput query set (FASTA)")
    parser.add_argument("--latency-queries", help="the latency query set (e.g. 220 queries)")
    parser.add_argument("--gpus", default="2", help="worker counts, e.g. 2,4")
    parser.add_argument("--modes", default="replicate,shard",
                        help="the local clusters' modes ('' for none)")
    parser.add_argument("--served", default=None,
                        help="served clusters' worker counts, e.g. 1,2 (default: the largest "
                        "of --gpus)")
    parser.add_argument("--task", default="megablast")
    parser.add_argument("--threads", type=int, default=0,
                        help="each search's and worker's threads (0: the CPUs over the "
                        "largest worker count)")
    parser.add_argument("--repeat", type=int, default=3, help="latency searches")
    parser.add_argument("--capped-memory", help="e.g. 1500MB: the capped cluster's run "
                        "(needs --latency-queries)")
    parser.add_argument("--device", default="gpu", choices=("gpu", "cpu"))
    parser.add_argument("--work", default=None)
    parser.add_argument("--tasks", action="store_true",
                        help="record the served throughput searches' Dask tasks "
                        "(tasks-served-N.tsv) and sum them per worker")
    args = parser.parse_args()
    args.gpu_counts = [int(n) for n in args.gpus.split(",")]
    args.served_counts = [int(n) for n in args.served.split(",")] if args.served else \
        [max(args.gpu_counts)]
    args.threads = args.threads or max(1, (os.cpu_count() or 1) // max(args.gpu_counts))
    if args.capped_memory and not args.latency_queries:
        parser.error("--capped-memory needs --latency-queries")
    bench = Bench(args)

    # untimed: compiles what `gblastn warmup` left, and reads the database into the page cache
    bench.one_process(args.latency_queries or args.queries, bench.path("first.out"))
    single = bench.path("single.out")
    reference = bench.one_process(args.queries, single)
    rows = [(f"1 {bench.unit}, one process", reference, 1.0, None)]
    latency_single = args.latency_queries and \
        bench.one_process(args.latency_queries, bench.path("latency-single.out"))
    rows += local_runs(bench, single, reference)
    served, latency = served_runs(bench, single, reference)
    rows += served
    capped = capped_run(bench) if args.capped_memory else None
    report(bench, rows, latency, latency_single, capped)


if __name__ == "__main__":
    main()
