"""The DP kernel's tuning (cuda/dynprog.cu) measured on whole searches: for each variant, the
search's wall time (the variants' runs alternate), the device time its DP launches held,
their extensions and cells, and the cells per second. Every variant must give the same
output; the script says so.

    python3 bench/gpu_dp.py -db DB -query QUERIES [--task blastn] [--threads 16] [--repeats 1]

The variants change, from the defaults, the threads a block and the band's columns (an
extension whose band outgrows them is left to the CPU).
"""

import argparse
import hashlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

VARIANTS = [
    {},
    {"DP_THREADS": 64},
    {"DP_BAND_COLUMNS": 64},
]

# Runs one search with a variant's module settings (argv[1], JSON); the search's own
# arguments follow.
LAUNCHER = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import gblastn.scan.gpu as G
for name, value in json.loads(sys.argv[1]).items():
    setattr(G, name, value)
import gblastn.cli as cli
sys.argv = ["gblastn"] + sys.argv[3:]
cli.main()
"""


def name_of(variant: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in variant.items()) or "defaults"


def run_once(variant: dict, search_args: list, out_path: str) -> tuple:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", LAUNCHER, json.dumps(variant), str(ROOT),
                           "search", *search_args, "-out", out_path, "-stage_times"],
                          check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    held = re.search(r"gpu dp ([\d.]+)s", done.stderr)
    kernel = re.search(r"gpu dp kernel ([\d.]+)s", done.stderr)
    tallies = dict((name, int(amount)) for name, amount in
                   re.findall(r"(gpu dp \w+) (\d+)", done.stderr))
    digest = hashlib.md5(Path(out_path).read_bytes()).hexdigest()[:8]
    return (wall, float(held.group(1)) if held else 0.0, tallies, digest,
            float(kernel.group(1)) if kernel else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-db", required=True)
    parser.add_argument("-query", required=True)
    parser.add_argument("--task", default="blastn")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    search_args = ["-task", args.task, "-db", args.db, "-query", args.query, "-outfmt", "6",
                   "-num_threads", str(args.threads), "-device", "gpu"]
    with tempfile.TemporaryDirectory() as work:
        out_path = str(Path(work) / "out.tsv")
        run_once({}, search_args, out_path)  # caches warm
        runs = {k: [] for k in range(len(VARIANTS))}
        for _ in range(args.repeats):
            for k, variant in enumerate(VARIANTS):
                runs[k].append(run_once(variant, search_args, out_path))
    digests = {run[3] for results in runs.values() for run in results}
    print(f"{args.query} against {args.db}, -task {args.task}, {args.threads} threads, "
          f"{args.repeats} runs each (alternating); outputs "
          f"{'identical' if len(digests) == 1 else 'DIFFER'}: {', '.join(sorted(digests))}")
    print("| variant | wall (s) | gpu dp held (s) | DP kernel (s) | extensions | cells | GCUPS |")
    print("|---|---|---|---|---|---|---|")
    for k, variant in enumerate(VARIANTS):
        wall = statistics.median(run[0] for run in runs[k])
        held = statistics.median(run[1] for run in runs[k])
        kernel = statistics.median(run[4] for run in runs[k])
        tallies = runs[k][-1][2]
        cells = tallies.get("gpu dp cells", 0)
        print(f"| {name_of(variant)} | {wall:.2f} | {held:.2f} | {kernel:.2f} | "
              f"{tallies.get('gpu dp extensions', 0):,} | {cells:,} | "
              f"{cells / kernel / 1e9 if kernel else 0:.2f} |")


if __name__ == "__main__":
    main()
