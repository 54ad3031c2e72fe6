"""Two gblastn trees timed on the same command, alternated: is a change faster?

    python3 bench/trees.py OLD_TREE NEW_TREE [--rounds 6] -- search -db DB -query Q.fa \
        -outfmt 6 -num_threads 2 -device cpu

Each tree is a folder holding a `gblastn` package (a `git worktree` of the old commit, say).
`python -m gblastn` imports the package of its working directory first, so each tree's
command runs from that tree's folder. Each tree's bytecode is written first: a fresh
worktree has none, and where PYTHONDONTWRITEBYTECODE is set none is ever written, so every
run of that tree would compile gblastn's sources again (0.1 s and more on two cores), which
is no part of the change. Then one untimed run of each (it fills the tree's numba cache),
then the rounds, the trees in turn (old, new, old, ...), so that the machine's drift falls on
both. Each run's output goes to its own file and must be byte-identical to the old tree's
first; the report gives each tree's wall, CPU (user + system) and peak RSS (min, median,
max) and the new/old ratio of each round's pair.

With --served "SERVE ARGS" (e.g. "-workers 2 -device cpu -num_threads 1", or "-gpus 2
-num_threads 16"), each tree first serves the command's -db (`gblastn serve -db DB SERVE
ARGS`, from its own folder; both clusters up at once) and each search is sent to its own
tree's cluster (-scheduler_file): the figures are then the searching process's, and the
first, untimed search of each tree loads and compiles its workers.
"""

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compare import run_measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="then -- and gblastn's arguments, without -out")
    parser.add_argument("old", type=Path, help="the tree before the change")
    parser.add_argument("new", type=Path, help="the tree with the change")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--served", metavar="SERVE_ARGS",
                        help="serve -db from each tree with these gblastn serve arguments "
                             "and send the searches there")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:cut]), argv[cut + 1:]
    if not command or "-out" in command:
        sys.exit("trees.py: give gblastn's arguments after --, without -out")
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    for name, tree in trees.items():
        if not (tree / "gblastn" / "__init__.py").is_file():
            sys.exit(f"trees.py: {tree} holds no gblastn package")
    for tree in trees.values():  # before any tree runs, its servers included
        subprocess.run([sys.executable, "-m", "compileall", "-q", "gblastn"], cwd=tree,
                       check=True, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory(prefix="gblastn-trees-") as work:
        with served_clusters(trees, command, args.served, Path(work)) as commands:
            runs = time_trees(trees, commands, args.rounds, Path(work))
    print(report(runs))


@contextlib.contextmanager
def served_clusters(trees: dict, command: list, serve_args: str | None, work: Path):
    """{tree name: its search command}: `command` as given, or with serve_args each sent to
    a cluster that its own tree serves until the block ends."""
    if serve_args is None:
        yield {name: command for name in trees}
        return
    if "-db" not in command:
        sys.exit("trees.py: --served needs the command's -db")
    db = command[command.index("-db") + 1]
    served = {}
    try:
        for name, tree in trees.items():
            scheduler_file = work / f"scheduler-{name}.json"
            log = open(work / f"serve-{name}.log", "w+")
            process = subprocess.Popen(
                [sys.executable, "-m", "gblastn", "serve", "-db", str(Path(db).resolve()),
                 *serve_args.split(), "-scheduler_file", str(scheduler_file)],
                cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)), stderr=log,
                start_new_session=True)
            served[name] = (process, log, scheduler_file)
        for name, (process, log, _) in served.items():
            _wait_serving(name, process, log)
        yield {name: [*command, "-scheduler_file", str(scheduler_file)]
               for name, (_, _, scheduler_file) in served.items()}
    finally:
        for process, log, _ in served.values():
            _stop(process)
            log.close()


def _wait_serving(name: str, process, log) -> None:
    while True:
        log.seek(0)
        if "gblastn: serving" in log.read():
            return
        if process.poll() is not None:
            log.seek(0)
            sys.exit(f"trees.py: the {name} tree's gblastn serve ended: {log.read()[-2000:]}")
        time.sleep(0.2)


def _stop(process) -> None:
    """SIGTERM to the serve process and its workers (its session), SIGKILL after 30 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def time_trees(trees: dict, commands: dict, rounds: int, work: Path) -> dict:
    """{tree name: [(wall, cpu, peak RSS in MB), ...]} over `rounds` alternated rounds after
    one untimed run each (each tree's own command, its bytecode written); exits when an
    output differs from the old tree's first."""
    reference = work / "reference.out"
    for name, tree in trees.items():
        run_once(tree, commands[name], reference if name == "old" else work / "warm.out")
    runs = {name: [] for name in trees}
    for number in range(rounds):
        for name, tree in trees.items():
            out = work / f"{name}-{number}.out"
            runs[name].append(run_once(tree, commands[name], out))
            if out.read_bytes() != reference.read_bytes():
                sys.exit(f"trees.py: the {name} tree's output of round {number + 1} differs "
                         "from the old tree's")
    return runs


def run_once(tree: Path, command: list, out: Path) -> tuple:
    """(wall seconds, CPU seconds, peak RSS in MB) of one search run from `tree`, as the
    kernel counts the child's own use."""
    seconds, usage, _, errors, status = run_measured(
        [sys.executable, "-m", "gblastn", *command, "-out", str(out)],
        env=dict(os.environ, PYTHONPATH=str(tree)), cwd=tree)
    if status:
        sys.exit(f"trees.py: {tree}: gblastn failed: {errors.strip()}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def report(runs: dict) -> str:
    """Each tree's min, median and max per figure, and the new/old ratio of each pair."""
    lines = [f"{'':6} {'wall s':>22} {'CPU s':>22} {'peak RSS MB':>22}"]
    for name, rows in runs.items():
        cells = [_spread([row[k] for row in rows]) for k in range(3)]
        lines.append(f"{name:6} " + " ".join(f"{cell:>22}" for cell in cells))
    pairs = list(zip(runs["old"], runs["new"]))
    for k, figure in enumerate(("wall", "CPU", "peak RSS")):
        ratios = [new[k] / old[k] for old, new in pairs if old[k] > 0]
        if ratios:
            lines.append(f"new/old {figure}: " + " ".join(f"{r:.3f}" for r in ratios) +
                         f" (median {statistics.median(ratios):.3f})")
    return "\n".join(lines)


def _spread(values: list) -> str:
    return f"{min(values):.2f} {statistics.median(values):.2f} {max(values):.2f}"


if __name__ == "__main__":
    main()
