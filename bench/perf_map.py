"""Which compiled functions a search's CPU time goes to, for Linux `perf`.

    perf record -F 999 -o perf.data python3 bench/perf_map.py search -db DB -query Q.fa ...
    perf report -i perf.data --no-children --sort symbol

numba's code lives in memory that perf cannot name, so a profile shows bare addresses.
This runs `gblastn ARGS` in this process, as `python -m gblastn` does, and at its exit
writes /tmp/perf-PID.map, the file perf reads for such code: the address, size and name of
every function numba has loaded or compiled. The names are numba's mangled ones
(`_ZN7gblastn7dynprog14xdrop_score_in...`: module, then function).
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def write_perf_map() -> int:
    """/tmp/perf-PID.map for numba's loaded code; returns how many functions it names.
    A function's size is taken as the distance to the next one's start."""
    from numba.core.registry import cpu_target

    engine = cpu_target.target_context.codegen()._engine
    starts = []
    for name in engine._defined_symbols:
        address = engine._ee.get_function_address(name)
        if address:
            starts.append((address, name))
    starts.sort()
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as out:
        for (address, name), following in zip(starts, starts[1:] + [(None, None)]):
            size = 4096 if following[0] is None else following[0] - address
            out.write(f"{address:x} {size:x} {name}\n")
    return len(starts)


def main(args: list) -> None:
    real_exit = os._exit

    def leave(code):  # the command line leaves through os._exit once its output is complete
        print(f"perf_map: {write_perf_map()} functions named", file=sys.stderr)
        real_exit(code)

    os._exit = leave
    sys.argv = ["gblastn"] + args
    from gblastn.__main__ import main as run_command_line
    run_command_line()


if __name__ == "__main__":
    main(sys.argv[1:])
