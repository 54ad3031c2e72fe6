#!/usr/bin/env python3
"""gblastn on several GPUs of one host (Dask, dask-cuda) against gblastn on one GPU, in one run.

For each GPU count: a cluster serving the database (`gblastn serve -gpus N`), one search sent
to it first (its workers load their share, compile and copy), then the timed search of the
query set (`gblastn search -scheduler_file F`), its throughput against the single-process
one-GPU search of the same set, and whether its output is byte-identical to that search's.
Then, against the largest cluster still running, the end-to-end time of a smaller query set
(the latency a user sees, process start-up included). Prints a short table.

usage: scaleout.py --db NAME --queries Q.fa [--latency-queries Q220.fa] [--gpus 1,2,4]
                   [--task megablast] [--mode auto|shard|replicate] [--work DIR]
Needs only gblastn with `pip install dask[distributed] dask-cuda` and the GPUs.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

COLUMNS = "6 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore score"
READY_SECONDS = 600


def gblastn(*args: str, check: bool = True) -> float:
    """Run gblastn; its wall time in seconds."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gblastn", *args], capture_output=True,
                          text=True)
    took = time.perf_counter() - started
    if check and done.returncode != 0:
        sys.exit(f"scaleout.py: gblastn {' '.join(args)} failed:\n{done.stderr}")
    return took


def search_args(args, query: str, out: str) -> list:
    return ["search", "-task", args.task, "-db", args.db, "-query", query, "-outfmt", COLUMNS,
            "-out", out]


class Served:
    """`gblastn serve -gpus N` until the block ends."""

    def __init__(self, args, gpus: int, folder: str):
        self.file = os.path.join(folder, f"scheduler-{gpus}.json")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gblastn", "serve", "-db", args.db, "-gpus", str(gpus),
             "-device", "gpu", "-scheduler_file", self.file], stderr=subprocess.PIPE, text=True)

    def __enter__(self):
        for line in iter(self.process.stderr.readline, ""):
            if line.startswith("gblastn: serving"):
                return self
            if line.startswith("gblastn: error"):
                break
        sys.exit("scaleout.py: gblastn serve did not start")

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=READY_SECONDS)


def same(a: str, b: str) -> bool:
    with open(a, "rb") as one, open(b, "rb") as other:
        return one.read() == other.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--queries", required=True, help="the throughput query set")
    parser.add_argument("--latency-queries", help="the latency query set (e.g. 220 queries)")
    parser.add_argument("--gpus", default="1,2,4")
    parser.add_argument("--task", default="megablast")
    parser.add_argument("--mode", default="auto", choices=("auto", "shard", "replicate"))
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    folder = args.work or tempfile.mkdtemp(prefix="gblastn-scaleout-")
    os.makedirs(folder, exist_ok=True)

    single = os.path.join(folder, "single.out")
    gblastn(*search_args(args, args.queries, single), "-device", "gpu")  # compiles, copies
    one_gpu = gblastn(*search_args(args, args.queries, single), "-device", "gpu")
    rows = [("1 GPU, one process", one_gpu, 1.0, True)]
    latency = None
    counts = [int(n) for n in args.gpus.split(",")]
    for gpus in counts:
        with Served(args, gpus, folder) as served:
            out = os.path.join(folder, f"cluster-{gpus}.out")
            sent = [*search_args(args, args.queries, out), "-scheduler_file", served.file,
                    "-cluster_mode", args.mode]
            gblastn(*sent)  # the workers load their share
            took = gblastn(*sent)
            rows.append((f"{gpus} GPU{'s' if gpus > 1 else ''}, cluster", took,
                         one_gpu / took, same(single, out)))
            if args.latency_queries and gpus == max(counts):
                small = os.path.join(folder, "latency.out")
                small_single = os.path.join(folder, "latency-single.out")
                gblastn(*search_args(args, args.latency_queries, small_single), "-device", "gpu")
                sent = [*search_args(args, args.latency_queries, small), "-scheduler_file",
                        served.file]
                gblastn(*sent)
                latency = (gpus, min(gblastn(*sent) for _ in range(3)), same(small_single, small))

    print(f"{'run':<24} {'seconds':>9} {'throughput':>11}  output")
    for name, took, ratio, identical in rows:
        print(f"{name:<24} {took:>9.2f} {ratio:>10.2f}x  "
              f"{'identical' if identical else 'DIFFERENT'}")
    if latency:
        gpus, took, identical = latency
        print(f"latency, {os.path.basename(args.latency_queries)} against the running "
              f"{gpus}-GPU cluster: {took:.2f} s end to end (best of 3), output "
              f"{'identical' if identical else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
