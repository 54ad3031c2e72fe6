#!/usr/bin/env python3
"""Where a task's first compilation goes, function by function, from numba's compile events.

Compiles one side of a first search from an empty cache (set XDG_CACHE_HOME or
NUMBA_CACHE_DIR to an empty folder first) in this process: `parent` the made-up search up
to the traceback (what the search's own process compiles), `child` what compile_ahead's
child compiles, `all` the whole made-up search. Prints the CPU seconds of the side, the
compilations, LLVM's share (time in llvmlite's calls), and the functions ranked by their
time without their callees' (exclusive) and with it (inclusive), in CPU seconds of the
compiling thread.

usage: compile_events.py [--task megablast] [--side all|parent|child] [--top 25]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Recorder:
    """Compile events as a stack: each compilation's time, its callees' compilations
    (nested: numba compiles a callee while typing its caller) and LLVM's time in it."""

    def __init__(self):
        self.records, self.stack, self.llvm_started, self.llvm = [], [], [], 0.0

    def listeners(self):
        from numba.core import event

        recorder = self

        class Compile(event.Listener):
            def on_start(self, ev):
                recorder.stack.append([time.thread_time(), 0.0, 0.0])

            def on_end(self, ev):
                started, callees, llvm = recorder.stack.pop()
                inclusive = time.thread_time() - started
                if recorder.stack:
                    recorder.stack[-1][1] += inclusive
                func = ev.data["dispatcher"].py_func
                recorder.records.append((f"{func.__module__}.{func.__qualname__}", inclusive,
                                         inclusive - callees, llvm, len(recorder.stack)))

        class Llvm(event.Listener):
            def on_start(self, ev):
                recorder.llvm_started.append(time.thread_time())

            def on_end(self, ev):
                spent = time.thread_time() - recorder.llvm_started.pop()
                if not recorder.llvm_started:  # the outermost of nested LLVM calls
                    recorder.llvm += spent
                    if recorder.stack:
                        recorder.stack[-1][2] += spent

        event.register("numba:compile", Compile())
        event.register("numba:llvm_lock", Llvm())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="megablast")
    parser.add_argument("--side", choices=("all", "parent", "child"), default="all")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    from gblastn.numba_start import skip_numba_extras

    skip_numba_extras()
    recorder = Recorder()
    recorder.listeners()
    started = time.process_time()
    from gblastn.compile_ahead import _load_stages, compile_traceback, on_one_stack_chunk

    if args.side == "child":
        on_one_stack_chunk(compile_traceback, args.task)
    else:
        on_one_stack_chunk(_load_stages, args.task, None, None, None, args.side == "all")
    cpu = time.process_time() - started
    records = recorder.records
    print(f"{args.task} {args.side}: {cpu:.1f} CPU-s, {len(records)} compilations, "
          f"LLVM {recorder.llvm:.1f} s")
    print("exclusive  inclusive  LLVM   depth  function")
    for name, inclusive, exclusive, llvm, depth in sorted(records, key=lambda r: -r[2])[:args.top]:
        print(f"{exclusive:9.2f}  {inclusive:9.2f}  {llvm:5.2f}  {depth:5d}  {name}")


if __name__ == "__main__":
    main()
