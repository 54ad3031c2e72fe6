"""Wall time per search stage, summed over the threads that ran it, and when each stage was
first and last busy (for -stage_times and the benchmarks: where a search's time goes, and
which stages overlap). A search's StageTimes is made by whoever runs it (the command line,
the Python API) and handed to its driver, engine and backend."""

import threading
import time
from contextlib import contextmanager

STAGES = ("start-up", "gpu set-up", "database load", "gpu copy", "query setup", "scan",
          "ungapped", "gapped", "traceback", "output")


class StageTimes:
    """Each thread keeps its own sums and spans, merged when they are read: a lock shared by
    every stage of every thread makes a convoy under the GIL: a thread preempted while
    holding it keeps the others waiting (docs/perf/pipeline.md)."""

    def __init__(self):
        self._local = threading.local()
        self._tables: list = []  # every thread's (seconds, spans, tallies), in the order they came
        self.origin = time.perf_counter()
        self.notes: dict = {}  # what the report adds beside the times (a cluster's split)

    @contextmanager
    def stage(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start, start)

    def add(self, name: str, seconds: float, start: float | None = None) -> None:
        start = time.perf_counter() - seconds if start is None else start
        sums, spans, _ = self._own_table()
        sums[name] = sums.get(name, 0.0) + seconds
        span = spans.get(name)
        if span is None:
            spans[name] = [start, start + seconds]
        else:
            span[0] = min(span[0], start)
            span[1] = max(span[1], start + seconds)

    def count(self, name: str, amount: int) -> None:
        """Adds to a tally of work done (seeds extended, DP cells), for rates per held
        second of the device."""
        tallies = self._own_table()[2]
        tallies[name] = tallies.get(name, 0) + int(amount)

    def _own_table(self) -> tuple:
        table = getattr(self._local, "table", None)
        if table is None:
            table = self._local.table = ({}, {}, {})
            self._tables.append(table)  # one append per thread, atomic under the GIL
        return table

    @property
    def seconds(self) -> dict:
        """Seconds per stage, summed over the threads."""
        total = dict.fromkeys(STAGES, 0.0)
        for sums, _, _ in list(self._tables):
            for name, value in list(sums.items()):
                total[name] = total.get(name, 0.0) + value
        return total

    @property
    def spans(self) -> dict:
        """Per stage, [first start, last end] over the threads (perf_counter seconds)."""
        merged: dict = {}
        for _, spans, _ in list(self._tables):
            for name, (first, last) in list(spans.items()):
                span = merged.setdefault(name, [first, last])
                span[0], span[1] = min(span[0], first), max(span[1], last)
        return merged

    @property
    def tallies(self) -> dict:
        """The work tallied with count(), summed over the threads."""
        total: dict = {}
        for _, _, tallies in list(self._tables):
            for name, amount in list(tallies.items()):
                total[name] = total.get(name, 0) + amount
        return total

    def report(self) -> str:
        seconds, spans = self.seconds, self.spans
        total = sum(seconds.values())
        parts = [f"{name} {secs:.2f}s" for name, secs in seconds.items() if secs > 0]
        origin = min([self.origin] + [span[0] for span in spans.values()])
        busy = [f"{name} {span[0] - origin:.2f}-{span[1] - origin:.2f}s"
                for name, span in spans.items()]
        notes = "".join(f"; {name}: {text}" for name, text in self.notes.items())
        line = (f"stage times (summed over threads, {total:.2f}s): " + ", ".join(parts) +
                "; busy between: " + ", ".join(busy) + notes)
        tallies = self.tallies
        if tallies:
            line += "\nwork done: " + ", ".join(f"{name} {amount}" for name, amount in
                                               sorted(tallies.items()))
        return line
