#!/usr/bin/env python3
"""Where a search's memory goes: a gblastn command run in this process under tracemalloc
(numpy reports its arrays to it), sampled every --every seconds; the sample that held most
is broken down by the code that allocated it.

  memory.py [--every 0.25] [--top 25] [--frames 4] -- search -task blastn -db ... -query ...

Prints the traced peak, the largest sample's total and its top allocation sites (each with
its innermost gblastn frames), and the process's peak RSS. Tracing slows the search.
"""

import argparse
import os
import resource
import sys
import threading
import time
import tracemalloc


def sample_largest(every: float, stop: threading.Event, largest: dict) -> None:
    while not stop.wait(every):
        current, _ = tracemalloc.get_traced_memory()
        if current > largest.get("bytes", 0):
            largest.update(bytes=current, snapshot=tracemalloc.take_snapshot(),
                           at=time.perf_counter())


def ours(frame) -> bool:
    return f"{os.sep}gblastn{os.sep}" in frame.filename


def site(trace_back, frames: int) -> str:
    picked = [f for f in trace_back if ours(f)][-frames:] or list(trace_back)[-1:]
    return " < ".join(f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(picked))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--every", type=float, default=0.25)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="gblastn's arguments, after --")
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command

    tracemalloc.start(25)
    stop, largest = threading.Event(), {}
    sampler = threading.Thread(target=sample_largest, args=(a.every, stop, largest), daemon=True)
    started = time.perf_counter()
    sampler.start()
    sys.argv = ["gblastn", *command]
    real_exit = os._exit

    def report_then_exit(code):  # the command line leaves with os._exit, skipping teardown
        stop.set()
        sampler.join()
        report(largest, started, a.top, a.frames)
        real_exit(code)
    os._exit = report_then_exit
    from gblastn.__main__ import main as gblastn_main
    try:
        gblastn_main()
    finally:
        os._exit = real_exit
    report_then_exit(0)


def report(largest: dict, started: float, top: int, frames: int) -> None:
    _, peak = tracemalloc.get_traced_memory()
    print(f"memory.py: {time.perf_counter() - started:.1f} s, traced peak {peak / 2**20:.0f} MiB, "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB",
          file=sys.stderr)
    if "snapshot" not in largest:
        return
    stats = largest["snapshot"].statistics("traceback")
    print(f"largest sample: {largest['bytes'] / 2**20:.0f} MiB at "
          f"{largest['at'] - started:.1f} s; its top sites (MiB, blocks, where):", file=sys.stderr)
    for stat in stats[:top]:
        print(f"  {stat.size / 2**20:9.1f} {stat.count:8d}  {site(stat.traceback, frames)}",
              file=sys.stderr)
    sys.stderr.flush()

if __name__ == "__main__":
    main()
