"""The greedy kernels' parameters (cuda/greedy.cu) measured on whole searches: for each
variant, the search's wall time (the variants' runs alternate), each kernel's launches and
summed launch time, and how many of its items it left to the CPU. Every variant must give the
same output; the script says so.

    python3 bench/gpu_greedy.py -db DB -query QUERIES [--threads 16] [--repeats 2]

The variants change, one at a time from the defaults: the distance limits of the traceback's
searches (`GpuBackend.greedy_tails`' `max_distance`, TAIL_MAX_DISTANCE by default) and of the
preliminary extensions (`greedy_extensions`' `max_distance`, HIT_MAX_DISTANCE; 1 << 62 is
none), the diagonals a warp keeps per distance (both methods' `row_cells`), the items (warps)
per block (the module's GREEDY_ITEM_WARPS), and the traceback's searches without their edit
runs (`greedy_tails`' `edit_runs`; the CPU then searches again, to the best distances). The
search calls both methods without these keywords; the launcher passes the variant's.
"""

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

VARIANTS = [
    {},
    {"hit_max_distance": 3000},
    {"tail_max_distance": 1 << 62},
    {"item_warps": 8},
    {"edit_runs": 0},
    {"row_cells": 128},
]

# Runs one search with a variant's settings (argv[1], JSON) and writes the kernels' launches
# to argv[2]; the search's own arguments follow.
LAUNCHER = r"""
import functools, json, sys, time
sys.path.insert(0, sys.argv[3])
import gblastn.scan.gpu as G
settings, report = json.loads(sys.argv[1]), sys.argv[2]
row_cells = settings.get("row_cells", G.GREEDY_ROW_CELLS)
G.GREEDY_ITEM_WARPS = settings.get("item_warps", G.GREEDY_ITEM_WARPS)
G.GpuBackend.greedy_tails = functools.partialmethod(
    G.GpuBackend.greedy_tails, row_cells=row_cells,
    max_distance=settings.get("tail_max_distance", G.TAIL_MAX_DISTANCE),
    edit_runs=bool(settings.get("edit_runs", 1)))
G.GpuBackend.greedy_extensions = functools.partialmethod(
    G.GpuBackend.greedy_extensions, row_cells=row_cells,
    max_distance=settings.get("hit_max_distance", G.HIT_MAX_DISTANCE))
launches = []
launch = G.GpuBackend._greedy_launch
def timed(self, name, *args, **kwargs):
    start = time.perf_counter()
    out = launch(self, name, *args, **kwargs)
    launches.append((name, out.shape[0], time.perf_counter() - start,
                     int((out[:, -1] == 0).sum())))
    return out
G.GpuBackend._greedy_launch = timed
import gblastn.cli as cli
leave = cli._leave
def record(message, code):
    with open(report, "w") as f:
        json.dump(launches, f)
    leave(message, code)
cli._leave = record
sys.argv = ["gblastn"] + sys.argv[4:]
cli.main()
"""


def name_of(variant: dict) -> str:
    return ", ".join(f"{k} {'none' if v >= 1 << 62 else v}" for k, v in variant.items()) \
        or "defaults"


def run_once(variant: dict, search_args: list, out_path: str) -> tuple:
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", LAUNCHER, json.dumps(variant), report.name,
                        str(ROOT), "search", *search_args, "-out", out_path], check=True)
        wall = time.perf_counter() - start
        launches = json.loads(Path(report.name).read_text() or "[]")
    digest = hashlib.md5(Path(out_path).read_bytes()).hexdigest()[:8]
    return wall, launches, digest


def summary(launches: list, kernel: str) -> str:
    mine = [x for x in launches if x[0] == kernel]
    items = sum(x[1] for x in mine)
    seconds = sum(x[2] for x in mine)
    undone = sum(x[3] for x in mine)
    return f"{len(mine)} | {seconds * 1e3:.0f} | {items:,} | {undone:,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-db", required=True)
    parser.add_argument("-query", required=True)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    search_args = ["-db", args.db, "-query", args.query, "-outfmt", "6",
                   "-num_threads", str(args.threads),
                   "-device", "gpu"]
    with tempfile.TemporaryDirectory() as work:
        out_path = str(Path(work) / "out.tsv")
        run_once({}, search_args, out_path)  # caches warm
        runs = {k: [] for k in range(len(VARIANTS))}
        for _ in range(args.repeats):
            for k, variant in enumerate(VARIANTS):
                runs[k].append(run_once(variant, search_args, out_path))
    digests = {run[2] for results in runs.values() for run in results}
    print(f"{args.query} against {args.db}, {args.threads} threads, {args.repeats} runs each "
          f"(alternating); outputs {'identical' if len(digests) == 1 else 'DIFFER'}: "
          f"{', '.join(sorted(digests))}")
    print("| variant | wall (s), each run | greedy_hits: launches | ms | items | left to "
          "the CPU | greedy_tails: launches | ms | items | left to the CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, variant in enumerate(VARIANTS):
        walls = [run[0] for run in runs[k]]
        each = ", ".join(f"{wall:.2f}" for wall in walls)
        last = runs[k][-1][1]
        print(f"| {name_of(variant)} | {each} (median {statistics.median(walls):.2f}) "
              f"| {summary(last, 'greedy_hits')} | {summary(last, 'greedy_tails')} |")


if __name__ == "__main__":
    main()
